"""Edges of the TREC readers and writers that mutation testing found untested (docs/testing.md): the messages
that name what is wrong, and the incremental run writer."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest

from rearank.errors import FormatError, RearankError
from rearank.io import trec


@pytest.mark.parametrize(("line", "message"), [
    ("q1 Q0 d1 1 2.5", "expected 6 columns 'qid Q0 docid rank score tag', got 5"),
    ("q1 Q0 d1 one 2.5 t", "rank 'one' is not an integer"),
    ("q1 Q0 d1 1 high t", "score 'high' is not a number"),
    ("q1 Q0 d1 1 nan t", "score 'nan' is not a finite number"),
])
def test_run_line_errors_say_what_is_wrong(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "run.trec"
    path.write_text("q1 Q0 d0 1 3.0 t\n" + line + "\n")
    with pytest.raises(FormatError) as err:
        trec.read_run(path)
    assert str(err.value) == f"{path}:2: {message}"


@pytest.mark.parametrize(("line", "message"), [
    ("q1 0 d1", "expected 4 columns 'qid iter docid rel', got 3"),
    ("q1 0 d1 yes", "relevance 'yes' is not an integer"),
])
def test_qrels_line_errors_say_what_is_wrong(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "qrels.txt"
    path.write_text(line + "\n")
    with pytest.raises(FormatError) as err:
        trec.read_qrels(path)
    assert str(err.value) == f"{path}:1: {message}"


def test_duplicate_warnings_name_the_file_and_what_was_repeated(tmp_path: Path, caplog) -> None:
    run, qrels = tmp_path / "run.trec", tmp_path / "qrels.txt"
    run.write_text("q Q0 a 1 2 t\nq Q0 a 2 1 t\n")
    qrels.write_text("q 0 a 1\nq 0 a 2\n")
    with caplog.at_level(logging.WARNING, logger="rearank.io"):
        trec.read_run(run)
        trec.read_qrels(qrels)
    assert f"{run}: 1 duplicate (qid, docid) lines ignored" in caplog.text
    assert f"{qrels}: 1 duplicate (qid, docid) judgments ignored" in caplog.text


def test_repeated_docids_of_a_docs_tsv_or_a_beir_corpus_warn_as_topics_do(tmp_path: Path, caplog) -> None:
    # a docs TSV or a BM25 corpus with a docid twice passed without a word while runs, qrels and topics warned
    from rearank.data.packs import load_docs, load_topics

    docs, corpus, queries = tmp_path / "docs.tsv", tmp_path / "corpus.jsonl", tmp_path / "queries.jsonl"
    docs.write_text("a\tfirst\nb\tother\na\tsecond\n")
    corpus.write_text("".join(f'{{"_id": "{i}", "title": "", "text": "{t}"}}\n' for i, t in
                              (("a", "first"), ("a", "second"), ("a", "third"))))
    queries.write_text('{"_id": "q", "text": "one"}\n{"_id": "q", "text": "two"}\n')
    with caplog.at_level(logging.WARNING, logger="rearank.io"):
        assert load_docs(docs)["a"] == ("", "first")
        assert load_docs(corpus)["a"] == ("", "first")
        assert load_docs(docs, {"b"}) == {"b": ("", "other")}  # a repeat of a docid not kept is not read
        assert load_topics(queries) == {"q": "one"}
    assert len(caplog.records) == 3
    assert f"{docs}: 1 repeated docids ignored (the first of each was kept)" in caplog.text
    assert f"{corpus}: 2 repeated docids ignored (the first of each was kept)" in caplog.text
    assert f"{queries}: 1 repeated qids ignored (the first of each was kept)" in caplog.text


@pytest.mark.parametrize(("args", "what", "bad"), [
    ({"qid": "q 1"}, "qid", "q 1"), ({"tag": "my tag"}, "run tag", "my tag"),
    ({"ranked": [("d 1", 1.0)]}, "docid", "d 1"),
])
def test_format_run_lines_names_the_field_and_the_file(args: dict, what: str, bad: str) -> None:
    fields = {"qid": "q1", "ranked": [("d1", 1.0)], "tag": "t", **args}
    with pytest.raises(RearankError) as err:
        trec.format_run_lines(fields["qid"], fields["ranked"], fields["tag"], path="out.trec")
    assert str(err.value).startswith(f"out.trec: cannot write {what} {bad!r}: it contains whitespace")
    with pytest.raises(RearankError, match=r"^the run file: cannot write"):
        trec.format_run_lines(fields["qid"], fields["ranked"], fields["tag"])
    assert trec.format_run_lines("q", [("d", 1.0)]) == "q Q0 d 1 1.0 rearank\n"  # the default tag


def test_qrels_writer_names_the_field(tmp_path: Path) -> None:
    with pytest.raises(RearankError, match=r": cannot write qid 'q 1'"):
        trec.write_qrels(tmp_path / "q.txt", {"q 1": {"d": 1}})
    with pytest.raises(RearankError, match=r": cannot write docid 'd 1'"):
        trec.write_qrels(tmp_path / "q.txt", {"q1": {"d 1": 1}})


def test_append_run_writes_and_flushes_one_query_with_its_tag(tmp_path: Path) -> None:
    path = tmp_path / "run.trec"
    with open(path, "w") as handle:
        trec.append_run(handle, "q1", [("b", 2.0), ("a", 1.0)], tag="mine")
        assert path.read_text() == "q1 Q0 b 1 2.0 mine\nq1 Q0 a 2 1.0 mine\n"  # flushed before close
        trec.append_run(handle, "q2", [("c", 1.0)])
        assert path.read_text().endswith("q2 Q0 c 1 1.0 rearank\n")  # the default tag
        with pytest.raises(RearankError, match=rf"^{path}: cannot write qid"):
            trec.append_run(handle, "q 3", [("c", 1.0)])
    with pytest.raises(RearankError, match=r"^the run file: cannot write docid"):
        trec.append_run(io.StringIO(), "q", [("d d", 1.0)])
