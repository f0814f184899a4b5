"""Round-synchronous reranking: the ready windows of every query form one batch, with a journal for resume.

A *round* holds, for each query still in progress, the windows it can run now: the next window of its
sliding schedule (listwise: a query's windows depend on each other), or all its groups (groupwise: groups
are independent, so one round does them all). A generator turns the round's prompts into generations in
any order (a Ray Dataset in :mod:`rearank.engine.ray`); the round engine applies them in schedule order with
the method's own step (:meth:`rearank.methods.base.Method.apply`), so with a deterministic backend the
results equal those of :class:`rearank.engine.Engine`.

Every generation is appended to the journal (``<output>.rounds.jsonl``) as it arrives. After an
interruption, :class:`Journal` with ``resume=True`` replays the journaled windows and only the others are
generated again; its first line records the settings, and a journal written with other settings is refused.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

from tqdm import tqdm

from rearank.backends.base import Generation, Prompt
from rearank.errors import FormatError, RearankError
from rearank.io.files import PathLike
from rearank.io.jsonl_log import read_jsonl_log
from rearank.methods.base import Method, Task
from rearank.types import Request, Result

log = logging.getLogger("rearank.rounds")

#: Turns ``(row id, prompt)`` pairs into ``(row id, generation)`` pairs, in any order.
Generator = Callable[[Sequence[tuple[int, Prompt]]], Iterable[tuple[int, Generation]]]

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
        self.entries[(qid, index)] = generation
        self._handle.write(json.dumps({"qid": qid, "index": index, **asdict(generation)}, ensure_ascii=False) + "\n")
        self._handle.flush()

    def close(self, *, remove: bool = False) -> None:
        """Close the file; ``remove=True`` deletes it (the run is complete)."""
        if not self._handle.closed:
            self._handle.close()
        if remove:
            self.path.unlink(missing_ok=True)


class RoundEngine:
    """Rerank with a method, one round of ready windows across all queries per ``generate`` call."""

    def __init__(self, method: Method, generate: Generator, journal: Journal | None = None) -> None:
        self.method, self.generate, self.journal = method, generate, journal
        self.rounds = 0

    def rerank(
        self,
        requests: Sequence[Request],
        on_result: Callable[[Result], None] | None = None,
        progress: bool = True,
    ) -> list[Result]:
        """Rerank every request; return results in input order, calling ``on_result`` as each query finishes.

        The journal is closed at the end, and deleted when every request finished.
        """
        started = [self.method.start(r) for r in requests]
        states = [state for state, _ in started]
        ready = [tasks for _, tasks in started]
        results: list[Result | None] = [None] * len(requests)
        bar = tqdm(total=len(requests), unit="query", disable=not progress, desc="rerank rounds", dynamic_ncols=True)
        complete = False
        try:
            while True:
                for i in range(len(requests)):
                    if results[i] is None and not ready[i]:
                        results[i] = self.method.result(states[i])
                        if on_result is not None:
                            on_result(results[i])
                        bar.update(1)
                active = [i for i in range(len(requests)) if ready[i]]
                if not active:
                    break
                self._round(active, states, ready, [r.query.qid for r in requests])
                bar.set_postfix(rounds=self.rounds, refresh=False)
            complete = True
        finally:
            bar.close()
            if self.journal is not None:
                self.journal.close(remove=complete)
        return [r for r in results if r is not None]

    def close(self) -> None:
        """Nothing to release here: the journal is closed by :meth:`rerank`, Ray by its own exit."""

    def _round(self, active: list[int], states: list[Any], ready: list[list[Task]], qids: list[str]) -> None:
        """Generate the ready tasks of ``active`` queries not in the journal, then apply all of them in order."""
        round_tasks = [(i, task) for i in active for task in ready[i]]
        known = self.journal.entries if self.journal is not None else {}
        todo = [(row, i, task) for row, (i, task) in enumerate(round_tasks) if (qids[i], task.index) not in known]
        got: dict[tuple[str, int], Generation] = {}
        if todo:
            self.rounds += 1
            for row, generation in self.generate([(row, task.prompt) for row, _, task in todo]):
                i, task = round_tasks[row]
                got[(qids[i], task.index)] = generation
                if self.journal is not None:
                    self.journal.add(qids[i], task.index, generation)
            missing = [(qids[i], task.index) for _, i, task in todo if (qids[i], task.index) not in got]
            if missing:
                raise RearankError(f"round {self.rounds}: the generator returned nothing for {len(missing)} "
                                   f"windows (first: query {missing[0][0]!r}, window {missing[0][1]})")
        for i in active:
            tasks, ready[i] = ready[i], []
            for task in tasks:
                key = (qids[i], task.index)
                ready[i].extend(self.method.apply(states[i], task, got.get(key) or known[key]))
