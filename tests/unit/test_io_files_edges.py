"""File plumbing's edges, word for word: the refusals' messages, the line a corrupt gzip stream is named at past the
first block, a tab inside a TSV text, duplicate judgments counted, ``read_text``, and ``fsync`` before the rename."""

from __future__ import annotations

import gzip
import logging
import os

import pytest

from rearank.errors import FormatError, RearankError
from rearank.io.files import (
    atomic_path,
    atomic_write,
    check_id,
    check_tsv_key,
    collect_by_query,
    fsync_file,
    id_problem,
    iter_json_lines,
    iter_lines,
    iter_tsv_pairs,
    open_input,
    parse_json,
    parse_yaml,
    read_text,
)


@pytest.mark.parametrize("name", ["t.txt", "t.txt.gz"])
def test_read_text_drops_the_bom_and_carriage_returns_and_ends_each_line(tmp_path, name):
    raw = "\ufeffa\r\nbX\r\n\nc".encode()
    path = tmp_path / name
    path.write_bytes(gzip.compress(raw) if name.endswith(".gz") else raw)
    assert read_text(path) == "a\nbX\n\nc\n"
    assert list(iter_lines(path)) == [(1, "a"), (2, "bX"), (3, ""), (4, "c")]


def test_a_gzip_stream_cut_after_the_first_block_names_the_line_after_it(tmp_path):
    # lines are read in blocks of whole lines until 2**20 bytes: 100-byte lines make blocks of
    # ceil(1048576 / 100) = 10486 lines; the stream ends early in the second block, read from line 10487 on
    path = tmp_path / "big.txt.gz"
    path.write_bytes(gzip.compress((("x" * 99 + "\n") * 20000).encode())[:-8])  # the trailer cut off
    read = []
    with pytest.raises(FormatError) as err:
        read.extend(number for number, _ in iter_lines(path))
    assert len(read) == 10486
    assert str(err.value) == (f"{path}:10487: cannot read compressed data "
                              "(Compressed file ended before the end-of-stream marker was reached)")


def test_a_folder_as_input_is_named(tmp_path):
    with pytest.raises(FormatError) as err:
        open_input(tmp_path)
    assert str(err.value) == f"{tmp_path}: is a folder, expected a file"


def test_json_and_yaml_refusals_are_one_line(tmp_path):
    with pytest.raises(FormatError) as err:
        parse_json("[1,", "f.json", 3)
    assert str(err.value) == "f.json:3: invalid JSON (Expecting value: line 1 column 4 (char 3))"
    with pytest.raises(RearankError) as err:
        parse_yaml("a: b: c", "t.yaml")
    assert str(err.value) == ('t.yaml: invalid YAML (mapping values are not allowed here in "<unicode string>", '
                              "line 1, column 5: a: b: c ^)")
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n[1]\n')
    with pytest.raises(FormatError) as err:
        list(iter_json_lines(path))
    assert str(err.value) == f"{path}:2: expected a JSON object, got list"


def test_tsv_pairs_split_at_the_first_tab_and_name_bad_lines(tmp_path):
    path = tmp_path / "docs.tsv"
    path.write_text("d1\ta\tb \n\nd2\n")
    pairs = iter_tsv_pairs(path, "docid")
    assert next(pairs) == (1, "d1", "a\tb")
    with pytest.raises(FormatError) as err:
        next(pairs)
    assert str(err.value) == f"{path}:3: expected 'docid TAB text', found no tab"
    path.write_text(" \ttext\n")
    with pytest.raises(FormatError) as err:
        list(iter_tsv_pairs(path, "docid"))
    assert str(err.value) == f"{path}:1: empty docid"


@pytest.mark.parametrize(("text", "problem"), [
    ("", "is empty"), ("a b", "contains whitespace"), ("\ufeffa", "starts with a byte-order mark (U+FEFF)"),
    ("a\ufeff", None)])
def test_id_problems_are_named(text, problem):
    assert id_problem(text) == problem


def test_unwritable_ids_and_keys_are_refused_in_full():
    with pytest.raises(RearankError) as err:
        check_id("a b", "docid", "run.trec")
    assert str(err.value) == ("run.trec: cannot write docid 'a b': it contains whitespace; ids must be non-empty, "
                              "without whitespace and not start with U+FEFF")
    with pytest.raises(RearankError) as err:
        check_tsv_key(" q", "qid", "topics.tsv")
    assert str(err.value) == ("topics.tsv: cannot write qid ' q': it is empty, has surrounding spaces, contains a "
                              "tab/newline or starts with a byte-order mark (U+FEFF)")
    assert check_id(7, "qid", "run.trec") == "7" and check_tsv_key(7, "qid", "topics.tsv") == "7"


def test_duplicate_judgments_keep_the_first_and_are_counted(caplog):
    rows = [("q1", "d1", 2), ("q1", "d1", 0), ("q2", "d1", 1), ("q1", "d1", 1), ("q1", "d2", 0)]
    with caplog.at_level(logging.WARNING, logger="rearank.io"):
        assert collect_by_query("qrels.txt", rows) == {"q1": {"d1": 2, "d2": 0}, "q2": {"d1": 1}}
    assert caplog.messages == ["qrels.txt: 2 duplicate (qid, docid) judgments ignored (the first of each was kept)"]


def test_fsync_flushes_the_temp_file_before_it_replaces_the_target(tmp_path, monkeypatch):
    target = tmp_path / "out.txt"
    synced = []
    real_fsync = os.fsync

    def fsync(fd):
        synced.append((os.fstat(fd).st_ino, target.exists()))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with atomic_write(target, fsync=True) as handle:
        handle.write("x\n")
    assert synced == [(target.stat().st_ino, False)]  # the file now at target, synced while target did not exist
    assert target.read_text() == "x\n"
    fsync_file(target)
    assert synced[-1] == (target.stat().st_ino, True)


def test_a_temp_file_removed_by_the_writer_is_one_line(tmp_path):
    target = tmp_path / "out.bin"
    with pytest.raises(RearankError) as err, atomic_path(target) as tmp:
        tmp.unlink()
    assert str(err.value) == f"{target}: cannot write (No such file or directory); {target} is unchanged"
    assert list(tmp_path.iterdir()) == []
