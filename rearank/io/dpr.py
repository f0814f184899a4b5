"""DPR's Wikipedia passages, ``psgs_w100.tsv``: a header ``id TAB text TAB title``, then one passage a line, fields
quoted CSV-style where they hold quotes or tabs (what DPR's own loader reads with ``csv.reader(delimiter="\\t")``).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Collection

from rearank.errors import FormatError, RearankError
from rearank.io.files import PathLike, open_input

HEADER = ("id", "text", "title")


def is_dpr_tsv(path: PathLike) -> bool:
    """Whether ``path`` starts with DPR's header line ``id TAB text TAB title``."""
    if str(path).removesuffix(".gz").endswith(".jsonl"):
        return False
    try:
        with open_input(path) as handle:
            first = handle.readline(256).decode("utf-8", errors="replace")
    except (RearankError, OSError, EOFError):  # the reader that follows names the problem
        return False
    return tuple(first.rstrip("\r\n").split("\t")) == HEADER


def read_dpr_passages(path: PathLike, ids: Collection[str] | None = None) -> dict[str, tuple[str, str]]:
    """``docid -> (title, text)`` of a DPR passages TSV; ``ids`` keeps only those (a repeated id keeps its first)."""
    docs: dict[str, tuple[str, str]] = {}
    with open_input(path) as raw:
        reader = csv.reader(io.TextIOWrapper(raw, encoding="utf-8", newline=""), delimiter="\t")
        for number, row in enumerate(reader, start=1):
            if number == 1:
                if tuple(row) != HEADER:
                    raise FormatError(path, 1, f"expected DPR's header {'TAB'.join(HEADER)!r}")
                continue
            if len(row) != 3:
                raise FormatError(path, reader.line_num, f"expected 3 tab-separated fields (id, text, title), got "
                                  f"{len(row)}")
            docid, text, title = row
            if not docid.strip():
                raise FormatError(path, reader.line_num, "empty passage id")
            if (ids is None or docid in ids) and docid not in docs:
                docs[docid] = (title, text)
    return docs
