"""Tab-separated documents (``docid TAB text``), as Anserini/Pyserini ship them (MS MARCO ``docs.tsv``)."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from rearank.io.files import PathLike, atomic_write, check_tsv_key, iter_tsv_pairs, one_line, warn_repeats


def read_docs(path: PathLike, ids: Collection[str] | None = None) -> dict[str, tuple[str, str]]:
    """Read ``docid TAB text`` lines into ``docid -> (title, text)`` with an empty title.

    ``ids`` keeps only those docids (saves memory on large collections). A repeated docid keeps its first text; the
    repeats (of the docids kept) are counted in one warning, as topics, runs and qrels do.
    """
    docs: dict[str, tuple[str, str]] = {}
    repeats = 0
    for _, docid, text in iter_tsv_pairs(path, "docid"):
        if ids is None or docid in ids:
            repeats += docid in docs
            docs.setdefault(docid, ("", text))
    warn_repeats(path, repeats, "docids")
    return docs


def write_docs(path: PathLike, docs: Mapping[str, tuple[str, str]]) -> None:
    """Write ``docid TAB text`` lines, write-then-rename.

    TSV has no title column: a non-empty title is joined before the text with a space. Tabs and line breaks
    become spaces.
    """
    with atomic_write(path) as handle:
        for docid, (title, text) in docs.items():
            body = f"{title} {text}" if title else text
            handle.write(f"{check_tsv_key(docid, 'docid', path)}\t{one_line(body)}\n")
