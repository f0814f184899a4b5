"""How many windows to keep in flight: a fixed number, or one found by measuring delivered tokens per second.

:class:`InFlightLimit` with ``auto`` starts at 1 window in flight and measures the tokens (prompt + completion)
the server delivers per second over an *epoch*: the first ``epoch_windows(limit)`` windows sent at the current
limit, from the first send until every one of them is answered (all of them, long answers too, so that short
answers coming back first do not make a count look faster than it is; windows sent after them keep the load
steady and are not measured). While an epoch beats the best one so far by more than ``margin`` the
limit doubles; when it does not, the limit goes back to the best one and stays (a server where concurrency does
not help settles near 1, a batching server grows as far as throughput grows). Every ``reprobe`` epochs at the
settled limit it tries one step up again, since a server's load changes. An answer that reports 429/503
(:attr:`Generation.throttled <rearank.backends.base.Generation.throttled>`) sends the limit back to the best one
below the count that was throttled and caps it there, so a rate-limited API runs just under its limit. Every
change is logged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from rearank.backends.base import AUTO, ERROR, Generation
from rearank.errors import RearankError

log = logging.getLogger("rearank.concurrency")


def parse_concurrency(value: int | str) -> int | str:
    """``"auto"`` or a whole number >= 1 (from ``-O concurrency=...``); anything else is a one-line error."""
    if value == AUTO:
        return AUTO
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RearankError(f"concurrency must be {AUTO!r} or a whole number >= 1, got {value!r}")
    return value


@dataclass
class _Epoch:
    limit: int
    sent: int = 0  # windows sent in this epoch (the first ``epoch_windows`` are measured)
    answered: int = 0  # measured windows answered
    tokens: int = 0
    began: float = 0.0
    ended: float = 0.0


class InFlightLimit:
    """The number of windows in flight (:attr:`limit`): call :meth:`sent` for each request and :meth:`record`
    for each answer.

    ``fixed``: a number that never changes; ``None`` (auto): the search above, between 1 and ``maximum``.
    ``clock`` is injectable for tests.
    """

    def __init__(self, fixed: int | None = None, *, maximum: int = 256, margin: float = 0.1, reprobe: int = 8,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.fixed, self.margin, self.reprobe, self.clock = fixed, margin, reprobe, clock
        self.limit = fixed if fixed is not None else 1
        self.cap = maximum
        self.best_rate, self.best_limit = 0.0, self.limit
        self.growing = True
        self.steady = 0  # epochs at the settled limit since the last probe
        self.history: list[tuple[int, float]] = []  # (limit, tokens/s) of every finished epoch
        self._epoch = _Epoch(self.limit)
        self._epoch_id = 0

    @property
    def auto(self) -> bool:
        return self.fixed is None

    @staticmethod
    def epoch_windows(limit: int) -> int:
        """Windows an epoch measures at ``limit`` in flight: enough for the pipeline to fill and drain twice."""
        return max(8, 2 * limit)

    def sent(self) -> tuple[int, bool]:
        """Note one request sent now; returns its epoch and whether it is measured, to give back to
        :meth:`record` with the answer."""
        epoch = self._epoch
        if epoch.sent == 0:
            epoch.began = self.clock()
        epoch.sent += 1
        return self._epoch_id, epoch.sent <= self.epoch_windows(epoch.limit)

    def record(self, ticket: tuple[int, bool], generation: Generation) -> None:
        """Note the answer of a request (``ticket``: what :meth:`sent` returned). Answers to requests sent
        under an earlier limit, or after an epoch's measured ones, do not count."""
        epoch_id, measured = ticket
        if not self.auto or epoch_id != self._epoch_id:
            return
        if generation.throttled:
            self._throttled()
            return
        if not measured:
            return
        epoch = self._epoch
        epoch.answered += 1
        if generation.finish_reason != ERROR:
            epoch.tokens += generation.prompt_tokens + generation.completion_tokens
        epoch.ended = self.clock()
        if epoch.answered >= self.epoch_windows(epoch.limit):
            self._finish(epoch)

    def _finish(self, epoch: _Epoch) -> None:
        rate = epoch.tokens / max(epoch.ended - epoch.began, 1e-9)
        self.history.append((epoch.limit, rate))
        better = rate > self.best_rate * (1 + self.margin)
        if epoch.limit == self.best_limit and not self.growing:
            self.best_rate = rate  # the settled limit's current figure: the server's load changes
            self.steady += 1
            probe = self.steady >= self.reprobe and epoch.limit < self.cap
            target = min(2 * epoch.limit, self.cap) if probe else epoch.limit
            self.steady = 0 if probe else self.steady
        elif better:
            self.best_rate, self.best_limit = rate, epoch.limit
            self.growing = epoch.limit < self.cap
            target = min(2 * epoch.limit, self.cap)
        else:
            self.growing, self.steady = False, 0
            target = self.best_limit
        self._set(target, f"{rate:,.0f} tokens/s at {epoch.limit} in flight (best {self.best_rate:,.0f} "
                          f"at {self.best_limit})")

    def _throttled(self) -> None:
        self.cap = max(1, self.limit - 1)
        self.best_limit = min(self.best_limit, self.cap)
        self.growing, self.steady = False, 0
        self._set(self.best_limit, "the server answered 429/503 (too busy)")

    def _set(self, limit: int, why: str) -> None:
        if limit != self.limit:
            log.info("concurrency %d -> %d: %s", self.limit, limit, why)
        self.limit = limit
        self._epoch_id += 1
        self._epoch = _Epoch(limit)
