"""TREC run files (``qid Q0 docid rank score tag``) and TREC qrels (``qid iter docid rel``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from math import isfinite
from operator import itemgetter
from typing import IO

from rearank.errors import FormatError
from rearank.io.files import PathLike, atomic_write, check_id, collect_by_query, iter_data_lines
from rearank.types import Run

Qrels = dict[str, dict[str, int]]


def trec_order(ranked: Iterable[tuple[str, float]]) -> list[tuple[str, float]]:
    """Sort ``(docid, score)`` pairs as trec_eval ranks them: score descending, ties by docid descending."""
    return sorted(ranked, key=_SCORE_THEN_DOCID, reverse=True)


_SCORE_THEN_DOCID = itemgetter(1, 0)


def read_run(path: PathLike) -> Run:
    """Read a TREC run into ``qid -> [(docid, score)]`` in trec_eval order (score desc, ties by docid desc).

    The rank column must be an integer but is otherwise ignored, as trec_eval does. A docid repeated within
    a query keeps its first line; the repeats are dropped with one warning giving their count.
    Queries appear in the order of their first line.
    """
    run = collect_by_query(path, _run_lines(path), "lines")
    return {qid: trec_order(ranked.items()) for qid, ranked in run.items()}


def _run_lines(path: PathLike) -> Iterator[tuple[str, str, float]]:
    for number, line in iter_data_lines(path):
        fields = line.split()
        if len(fields) != 6:
            raise FormatError(path, number, f"expected 6 columns 'qid Q0 docid rank score tag', got {len(fields)}")
        qid, _, docid, rank, score_text, _ = fields
        try:
            int(rank)
            score = float(score_text)
        except ValueError:
            raise FormatError(path, number, _bad_number(rank, score_text)) from None
        if not isfinite(score):
            raise FormatError(path, number, f"score {score_text!r} is not a finite number")
        yield qid, docid, score


def _bad_number(rank: str, score: str) -> str:
    try:
        int(rank)
    except ValueError:
        return f"rank {rank!r} is not an integer"
    return f"score {score!r} is not a number"


def format_run_lines(qid: str, ranked: Sequence[tuple[str, float]], tag: str = "rearank", *,
                     path: PathLike = "the run file") -> str:
    """Render one query's ranking (list order = rank order) as TREC run lines for the file ``path``.

    An id or tag the format cannot carry (see :func:`rearank.io.files.id_problem`) raises a one-line error.
    """
    qid = check_id(qid, "qid", path)
    tag = check_id(tag, "run tag", path)
    return "".join(
        f"{qid} Q0 {check_id(docid, 'docid', path)} {rank} {float(score)!r} {tag}\n"
        for rank, (docid, score) in enumerate(ranked, start=1)
    )


def append_run(handle: IO[str], qid: str, ranked: Sequence[tuple[str, float]], tag: str = "rearank") -> None:
    """Write one query's ranking to an open run file and flush, for incremental output."""
    handle.write(format_run_lines(qid, ranked, tag, path=getattr(handle, "name", "the run file")))
    handle.flush()


def write_run(path: PathLike, run: Mapping[str, Sequence[tuple[str, float]]], tag: str = "rearank") -> None:
    """Write a run (list order = rank order) as ``qid Q0 docid rank score tag`` lines, write-then-rename."""
    with atomic_write(path) as handle:
        for qid, ranked in run.items():
            handle.write(format_run_lines(qid, ranked, tag, path=path))


def read_qrels(path: PathLike) -> Qrels:
    """Read TREC qrels ``qid iter docid rel`` into ``qid -> {docid: rel}`` (integer, possibly negative, grades).

    A (qid, docid) judged twice keeps its first grade; repeats are dropped with one warning giving their count.
    """
    return collect_by_query(path, _qrels_lines(path))


def _qrels_lines(path: PathLike) -> Iterator[tuple[str, str, int]]:
    for number, line in iter_data_lines(path):
        fields = line.split()
        if len(fields) != 4:
            raise FormatError(path, number, f"expected 4 columns 'qid iter docid rel', got {len(fields)}")
        qid, _, docid, rel = fields
        try:
            yield qid, docid, int(rel)
        except ValueError:
            raise FormatError(path, number, f"relevance {rel!r} is not an integer") from None


def write_qrels(path: PathLike, qrels: Mapping[str, Mapping[str, int]]) -> None:
    """Write qrels as ``qid 0 docid rel`` lines, write-then-rename."""
    with atomic_write(path) as handle:
        for qid, judged in qrels.items():
            qid = check_id(qid, "qid", path)
            for docid, rel in judged.items():
                handle.write(f"{qid} 0 {check_id(docid, 'docid', path)} {int(rel)}\n")
