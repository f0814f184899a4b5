"""The engine's journal: every answer of a run in progress, for resume window by window.

:class:`rearank.engine.Engine` with a journal appends each generation (``<output>.rounds.jsonl`` for
``rearank rerank --engine ray``) as it arrives. After an interruption, :class:`Journal` with ``resume=True``
loads it, the engine replays the journaled windows and sends only the others; its first line records the
settings, and a journal written with other settings is refused.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

from rearank.backends.base import Generation
from rearank.errors import FormatError, RearankError
from rearank.io.files import PathLike
from rearank.io.jsonl_log import read_jsonl_log

JOURNAL_VERSION = 1


def _journal_line(record: dict) -> None:
    """Raise KeyError, TypeError or ValueError unless ``record`` is a journal header or a journaled generation."""
    if "journal" not in record:
        str(record["qid"]), int(record["index"])
        Generation(**{k: v for k, v in record.items() if k not in ("qid", "index")})


class Journal:
    """Generations of a run in progress, one JSON line each, keyed by ``(qid, window index)``.

    The first line is ``{"journal": 1, "config": {...}}``. ``resume=True`` loads an existing journal written
    with the same ``config`` (a torn last line, from a kill mid-write, is dropped with a warning); otherwise
    the file is started afresh.
    """

    def __init__(self, path: PathLike, config: Mapping[str, Any], *, resume: bool = False) -> None:
        self.path = Path(path)
        self.config = json.loads(json.dumps(dict(config)))  # as it reads back
        self.entries: dict[tuple[str, int], Generation] = {}
        self._lock = threading.Lock()  # windows in flight answer from many threads
        if resume and self.path.is_file():
            self._load()
            self._handle: IO[str] = self._open("a")
        else:
            self._handle = self._open("w")
            self._handle.write(json.dumps({"journal": JOURNAL_VERSION, "config": self.config}) + "\n")
            self._handle.flush()

    def _open(self, mode: str) -> IO[str]:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return open(self.path, mode, encoding="utf-8", newline="\n")
        except OSError as err:
            raise RearankError(f"{self.path}: cannot write the round journal ({err.strerror or err})") from None

    def _load(self) -> None:
        records = read_jsonl_log(self.path, _journal_line, "round journal", "delete the journal to start over")
        if not records:
            raise FormatError(self.path, 1, "not a rearank round journal; delete it to start over")
        self._check_header(records[0])
        for record in records[1:]:
            key = (str(record.pop("qid")), int(record.pop("index")))
            self.entries[key] = Generation(**record)

    def _check_header(self, record: dict) -> None:
        if record.get("journal") != JOURNAL_VERSION:
            raise FormatError(self.path, 1, "not a rearank round journal; delete it to start over")
        theirs = record.get("config", {})
        changed = sorted(k for k in set(theirs) | set(self.config) if theirs.get(k) != self.config.get(k))
        if changed:
            raise RearankError(
                f"{self.path} was written with other settings ({', '.join(changed)}); rerun with the same "
                "settings to resume, or delete it to start over")

    def add(self, qid: str, index: int, generation: Generation) -> None:
        """Append one generation and flush it."""
        record = {"qid": qid, "index": index, **asdict(generation)}
        if not generation.error:
            del record["error"]  # only a failed call says why (the engine journals none)
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self._lock:
            self.entries[(qid, index)] = generation
            self._handle.write(line)
            self._handle.flush()

    def close(self, *, remove: bool = False) -> None:
        """Close the file; ``remove=True`` deletes it (the run is complete)."""
        if not self._handle.closed:
            self._handle.close()
        if remove:
            self.path.unlink(missing_ok=True)
