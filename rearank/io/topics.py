"""Tab-separated topics (``qid TAB text``), as Anserini/Pyserini ship them; documents are in :mod:`rearank.io.docs`."""

from __future__ import annotations

from collections.abc import Mapping

from rearank.io.files import PathLike, atomic_write, check_tsv_key, iter_tsv_pairs, one_line, warn_repeats


def read_topics(path: PathLike) -> dict[str, str]:
    """Read ``qid TAB text`` lines into ``qid -> text`` (file order; a repeated qid keeps its first text)."""
    topics: dict[str, str] = {}
    repeats = 0
    for _, qid, text in iter_tsv_pairs(path, "qid"):
        if qid in topics:
            repeats += 1
            continue
        topics[qid] = text
    warn_repeats(path, repeats, "qids")
    return topics


def write_topics(path: PathLike, topics: Mapping[str, str]) -> None:
    """Write ``qid TAB text`` lines (tabs and line breaks in texts become spaces), write-then-rename."""
    with atomic_write(path) as handle:
        for qid, text in topics.items():
            handle.write(f"{check_tsv_key(qid, 'qid', path)}\t{one_line(text)}\n")
