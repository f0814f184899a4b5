"""Append-only JSON Lines logs that a rerun resumes: ``rag eval``'s ``items.jsonl``, the BAR-RAG filter log, the
reader response cache and the round journal of ``rearank rerank --engine ray``
(:class:`rearank.engine.journal.Journal`).

Records are appended one line at a time and flushed (:class:`JsonlAppender`), so an interrupted run loses at most
the line it was writing; :func:`read_jsonl_log` drops such a torn last line (with a warning, cutting it from the
file) and refuses any other bad line with a :class:`~rearank.errors.FormatError` naming the file and line.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from rearank.errors import FormatError, RearankError
from rearank.io.files import PathLike, atomic_write

log = logging.getLogger("rearank.io.jsonl_log")


def read_jsonl_log(path: PathLike, check: Callable[[dict], Any], what: str, fix: str,
                   repair: bool = True) -> list[dict]:
    """The records of ``path`` in order (none when it does not exist).

    ``check(record)`` raises KeyError, TypeError or ValueError for a record of the wrong shape. A last line that
    is cut short or fails ``check`` is an interrupted append: dropped (and cut from the file if ``repair``). Any other bad line
    raises ``FormatError(path, line, "not a {what} record (...); {fix}")``.
    """
    path = Path(path)
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    complete, tail = lines[:-1], lines[-1]  # after the last newline: nothing, or a torn record
    torn = tail.strip() != ""
    records: list[dict] = []
    kept: list[str] = []
    for number, line in enumerate(complete, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict):
                raise TypeError(f"expected a JSON object, got {type(record).__name__}")
            check(record)
        except (ValueError, KeyError, TypeError) as err:
            if number == len(complete) and not torn:
                torn = True  # the last line did not parse: an interrupted append
                continue
            raise FormatError(path, number, f"not a {what} record ({err}); {fix}") from None
        records.append(record)
        kept.append(line)
    if torn:
        log.warning("%s: dropping an unfinished last %s record", path, what)
    if torn and repair:
        with atomic_write(path) as handle:
            handle.writelines(line + "\n" for line in kept)
    return records


class JsonlAppender:
    """Append JSON records to ``path`` (opened on the first write, parents made), flushing each one."""

    def __init__(self, path: PathLike) -> None:
        self.path = Path(path)
        self._handle: IO[str] | None = None

    def write(self, record: dict) -> None:
        """Append one record and flush it; an OS error (a full disk) is a one-line error naming the file."""
        try:
            if self._handle is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._handle = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
            self._handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            self._handle.flush()
        except OSError as err:
            self.close()
            raise RearankError(f"{self.path}: cannot write ({err.strerror or err}); the records before this one "
                               "are kept: free space and rerun to resume") from None

    def close(self) -> None:
        """Close the file (a final flush that fails was reported by :meth:`write` already)."""
        if self._handle is not None:
            with contextlib.suppress(OSError):
                self._handle.close()
            self._handle = None

    def __enter__(self) -> JsonlAppender:  # noqa: PYI034 (Self needs Python 3.11)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
