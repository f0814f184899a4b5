"""Tab-separated topics (``qid TAB text``) and documents (``docid TAB text``), as Anserini/Pyserini ship them."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping

from rearank.errors import FormatError
from rearank.io.files import PathLike, atomic_write, check_tsv_key, iter_data_lines, log, one_line


def _iter_pairs(path: PathLike, what: str) -> Iterator[tuple[int, str, str]]:
    for number, line in iter_data_lines(path):
        key, tab, text = line.partition("\t")
        key = key.strip()
        if not tab:
            raise FormatError(path, number, f"expected '{what} TAB text', found no tab")
        if not key:
            raise FormatError(path, number, f"empty {what}")
        yield number, key, text.strip()


def read_topics(path: PathLike) -> dict[str, str]:
    """Read ``qid TAB text`` lines into ``qid -> text`` (file order; a repeated qid keeps its first text)."""
    topics: dict[str, str] = {}
    repeats = 0
    for _, qid, text in _iter_pairs(path, "qid"):
        if qid in topics:
            repeats += 1
            continue
        topics[qid] = text
    if repeats:
        log.warning("%s: %d repeated qids ignored (the first of each was kept)", path, repeats)
    return topics


def read_docs(path: PathLike, ids: Collection[str] | None = None) -> dict[str, tuple[str, str]]:
    """Read ``docid TAB text`` lines into ``docid -> (title, text)`` with an empty title.

    ``ids`` keeps only those docids (saves memory on large collections). A repeated docid keeps its first text.
    """
    docs: dict[str, tuple[str, str]] = {}
    for _, docid, text in _iter_pairs(path, "docid"):
        if (ids is None or docid in ids) and docid not in docs:
            docs[docid] = ("", text)
    return docs


def write_topics(path: PathLike, topics: Mapping[str, str]) -> None:
    """Write ``qid TAB text`` lines (tabs and line breaks in texts become spaces), write-then-rename."""
    with atomic_write(path) as handle:
        for qid, text in topics.items():
            handle.write(f"{check_tsv_key(qid, 'qid')}\t{one_line(text)}\n")


def write_docs(path: PathLike, docs: Mapping[str, tuple[str, str]]) -> None:
    """Write ``docid TAB text`` lines, write-then-rename.

    TSV has no title column: a non-empty title is joined before the text with a space. Tabs and line breaks
    become spaces.
    """
    with atomic_write(path) as handle:
        for docid, (title, text) in docs.items():
            body = f"{title} {text}" if title else text
            handle.write(f"{check_tsv_key(docid, 'docid')}\t{one_line(body)}\n")
