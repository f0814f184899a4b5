"""File plumbing: gzip by suffix, undecodable input, write-then-rename."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from rearank.errors import FormatError, MissingDataError, RearankError
from rearank.io import trec
from rearank.io.files import atomic_folder, atomic_path, atomic_write, iter_lines

RUN = {"q1": [("d1", 3.0), ("d2", 2.5)], "q2": [("d9", 1.0)]}


def test_gzip_is_chosen_by_suffix(tmp_path: Path) -> None:
    trec.write_run(tmp_path / "run.trec.gz", RUN)
    raw = (tmp_path / "run.trec.gz").read_bytes()
    assert raw[:2] == b"\x1f\x8b"
    assert gzip.decompress(raw).decode().splitlines()[0] == "q1 Q0 d1 1 3.0 rearank"
    assert trec.read_run(tmp_path / "run.trec.gz") == RUN


def test_plain_file_is_plain_text(tmp_path: Path) -> None:
    trec.write_run(tmp_path / "run.trec", RUN, tag="t")
    assert (tmp_path / "run.trec").read_text().splitlines() == [
        "q1 Q0 d1 1 3.0 t", "q1 Q0 d2 2 2.5 t", "q2 Q0 d9 1 1.0 t",
    ]


def test_corrupt_gzip_is_a_format_error(tmp_path: Path) -> None:
    path = tmp_path / "run.trec.gz"
    path.write_bytes(b"this is not gzip data\n")
    with pytest.raises(FormatError, match="run.trec.gz"):
        trec.read_run(path)


def test_truncated_gzip_is_a_format_error(tmp_path: Path) -> None:
    path = tmp_path / "run.trec.gz"
    data = gzip.compress(("q1 Q0 d1 1 3.0 t\n" * 5000).encode())
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(FormatError):
        trec.read_run(path)


def test_undecodable_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "run.trec"
    path.write_bytes(b"q1 Q0 d1 1 3.0 t\nq1 Q0 \xff\xfe 2 2.0 t\n")
    with pytest.raises(FormatError) as info:
        trec.read_run(path)
    assert info.value.line == 2
    assert "UTF-8" in str(info.value)


def test_missing_file_is_missing_data(tmp_path: Path) -> None:
    with pytest.raises(MissingDataError, match="no such file"):
        trec.read_qrels(tmp_path / "absent.txt")


def test_directory_is_a_format_error(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="directory"):
        trec.read_qrels(tmp_path)


def test_crlf_lines_are_read(tmp_path: Path) -> None:
    path = tmp_path / "qrels.txt"
    path.write_bytes(b"q1 0 d1 2\r\nq1 0 d2 0\r\n")
    assert trec.read_qrels(path) == {"q1": {"d1": 2, "d2": 0}}
    assert [line for _, line in iter_lines(path)] == ["q1 0 d1 2", "q1 0 d2 0"]


def test_failed_write_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old\n")
    with pytest.raises(RuntimeError), atomic_write(target) as handle:
        handle.write("half")
        raise RuntimeError("boom")
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_unwritable_ids_are_refused_before_replacing(tmp_path: Path) -> None:
    target = tmp_path / "run.trec"
    trec.write_run(target, RUN)
    before = target.read_text()
    with pytest.raises(RearankError, match="whitespace"):
        trec.write_run(target, {"q 1": [("d1", 1.0)]})
    assert target.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.trec"]


def test_writer_creates_parent_folders(tmp_path: Path) -> None:
    trec.write_qrels(tmp_path / "a" / "b" / "qrels.txt", {"q": {"d": 1}})
    assert (tmp_path / "a" / "b" / "qrels.txt").read_text() == "q 0 d 1\n"


def test_atomic_path_replaces_on_success_and_keeps_the_target_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "t.parquet"
    with atomic_path(target) as tmp:
        assert tmp.parent == target.parent and tmp.suffix == ".parquet" and tmp != target
        tmp.write_bytes(b"one")
    assert target.read_bytes() == b"one"
    with pytest.raises(ValueError), atomic_path(target) as tmp:
        tmp.write_bytes(b"two")
        raise ValueError("boom")
    assert target.read_bytes() == b"one"
    assert [p.name for p in target.parent.iterdir()] == ["t.parquet"]


def test_atomic_folder_builds_aside_and_replaces_only_when_asked(tmp_path: Path) -> None:
    target = tmp_path / "index"
    with atomic_folder(target) as tmp:
        assert not target.exists()
        (tmp / "a").write_text("first")
    assert (target / "a").read_text() == "first"
    with atomic_folder(target) as tmp:  # a finished folder is kept (a concurrent build that won)
        (tmp / "a").write_text("second")
    assert (target / "a").read_text() == "first"
    with atomic_folder(target, replace=True) as tmp:
        (tmp / "b").write_text("third")
    assert [p.name for p in target.iterdir()] == ["b"]
    with pytest.raises(ValueError), atomic_folder(target, replace=True) as tmp:
        (tmp / "c").write_text("lost")
        raise ValueError("boom")
    assert [p.name for p in target.iterdir()] == ["b"]
    assert [p.name for p in tmp_path.iterdir()] == ["index"]
