"""Run statistics of a reranking run: LLM calls (windows), sequential rounds, tokens, parse statuses, failed calls
and the first one's cause, wall time; written as JSON. :meth:`RunStats.failure` says when failed calls make the run
a failure (``--fail-share``)."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from rearank.backends.base import ERROR
from rearank.io.files import PathLike, atomic_write
from rearank.methods.listwise.answer import STATUSES
from rearank.types import Result, WindowTrace


@dataclass
class RunStats:
    """Counts over the results seen so far; wall time runs from creation (or :meth:`restart`), plus
    ``earlier_s``, the wall time of the sessions a resumed run continues."""

    queries: int = 0
    calls: int = 0
    rounds: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    statuses: Counter = field(default_factory=Counter)
    think_budget_hits: int = 0
    first_error: str = ""
    started: float = field(default_factory=time.perf_counter)
    earlier_s: float = 0.0

    def restart(self) -> None:
        """Restart the wall clock (e.g. after loading a model, so load time is not counted)."""
        self.started = time.perf_counter()

    def add(self, result: Result) -> None:
        """Count one finished query: one LLM call per window, and its sequential rounds (windows of one round
        were sent together; a query waits for each round in turn)."""
        self.add_traces(result.traces)

    def add_traces(self, traces: Iterable[WindowTrace]) -> None:
        """Count one finished query from its window traces (as ``--resume`` does for the queries already done)."""
        traces = list(traces)
        self.queries += 1
        self.calls += len(traces)
        self.rounds += max((trace.round for trace in traces), default=-1) + 1
        for trace in traces:
            self.prompt_tokens += trace.prompt_tokens
            self.completion_tokens += trace.completion_tokens
            self.statuses[trace.status] += 1
            self.think_budget_hits += trace.think_budget_hit
            if trace.status == ERROR and not self.first_error:
                self.first_error = trace.error or "the backend gave no reason"

    @property
    def failed(self) -> int:
        """Windows whose model call failed (they kept their input order; ``--resume`` retries their queries)."""
        return self.statuses.get(ERROR, 0)

    def failure(self, share: float = 1.0) -> str | None:
        """One line naming the cause when at least ``share`` of the calls failed (and one did: ``share=1`` is a
        run whose every call failed, ``0`` any failure); None otherwise."""
        if not self.failed or self.failed < share * self.calls:
            return None
        which = f"all {self.calls}" if self.failed == self.calls else f"{self.failed} of {self.calls}"
        return (f"{which} model calls failed (first: {self.first_error}); their windows kept the input order: fix "
                "the cause and rerun with --resume to retry them")

    def to_dict(self) -> dict:
        """The figures as a JSON-ready dict (every parse status listed, zero when unseen)."""
        wall = time.perf_counter() - self.started + self.earlier_s
        per_query = max(self.queries, 1)
        known = set(STATUSES)
        return {
            "queries": self.queries,
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "rounds": self.rounds,
            "calls_per_query": self.calls / per_query,
            "rounds_per_query": self.rounds / per_query,
            "prompt_tokens_per_query": self.prompt_tokens / per_query,
            "completion_tokens_per_query": self.completion_tokens / per_query,
            "status_counts": {s: self.statuses.get(s, 0) for s in (*STATUSES, *sorted(set(self.statuses) - known))},
            "think_budget_hits": self.think_budget_hits,
            "failed_calls": self.failed,
            "first_error": self.first_error,
            "wall_time_s": wall,
            "queries_per_s": self.queries / wall if wall > 0 else 0.0,
            "completion_tokens_per_s": self.completion_tokens / wall if wall > 0 else 0.0,
        }

    def summary(self) -> str:
        """One line for the terminal: the windows each query needed in how many sequential rounds (the windows of
        many queries share a backend call when batched), and the failed calls."""
        d = self.to_dict()
        bad = {s: n for s, n in d["status_counts"].items() if s not in ("ok", ERROR) and n}
        failed = f"; {self.failed} of {self.calls} model calls failed" if self.failed else ""
        return (
            f"{plural(d['queries'], 'query', 'queries')}, {plural(d['calls'], 'window')} "
            f"({d['calls_per_query']:.1f} per query in {d['rounds_per_query']:.1f} sequential rounds), "
            f"{d['prompt_tokens']} prompt + "
            f"{d['completion_tokens']} completion tokens, {d['wall_time_s']:.1f}s "
            f"({d['queries_per_s']:.3f} queries/s); parse: {d['status_counts'].get('ok', 0)} ok"
            + "".join(f", {n} {s}" for s, n in bad.items()) + failed
        )

    def write(self, path: PathLike, extra: dict | None = None) -> None:
        """Write :meth:`to_dict` (plus ``extra`` entries, e.g. the run's configuration) as JSON, write-then-rename."""
        with atomic_write(path) as handle:
            json.dump({**self.to_dict(), **(extra or {})}, handle, indent=2)
            handle.write("\n")


def plural(n: int, one: str, many: str | None = None) -> str:
    """``1 query``, ``2 queries``: ``n`` and the noun that agrees with it."""
    return f"{n} {one if n == 1 else many or one + 's'}"

