"""How many windows to keep in flight: a fixed number, or one the controller finds while the run goes on.

:class:`InFlightLimit` with ``auto`` starts from the count the backend declares (``auto_start``; the openai
backend: 8), never more than the windows the ready queries can fill (the engine reports them with
:meth:`InFlightLimit.available`), and then decides on *time*, not on counts of answers:

* **From the server's own metrics** (vLLM and SGLang ``/metrics``, :class:`rearank.backends.metrics.ServerLoad`,
  polled every ``poll_s`` seconds): while nothing waits in the server's queue and its KV cache has room (below
  ``high_kv``), the limit is never below the windows the ready queries can fill (up to ``maximum``): the server
  runs them in its batch; when requests wait in two polls in a row, the limit comes down to what the server
  runs plus one waiting (so that it never idles between an answer and the next request) and stays at most
  there until ``4 x reprobe`` polls pass without a queue; a KV cache above ``high_kv`` holds it where it is.
* **Without metrics** (fake servers, hosted APIs), by measuring: each answer tells how many tokens the server
  generated over the window's life and its share of the server meanwhile (the integral of 1 / windows in flight
  over its life); tokens over shares is the server's rate at that count. Completion tokens are the work that
  concurrency changes (a window's prefill is paid once whatever the count, and counting its prompt tokens would
  make short answers look fast); on a server that shares its steps among the sequences it runs, a window's
  generated tokens over its share come out the same for short and long answers, so the figure does not favour
  short answers coming back first. After a raise, windows sent before it and answered mostly at the new count
  count too: their share before the raise is taken at the rate measured then, the rest of their tokens is the
  new count's (on a server that slows down with concurrency the step up shows in the answers of the windows
  already out, before any window sent at the new count comes back). A count is measured for ``span`` times its
  windows' median latency (at least two answers), so a decision takes seconds on a server whose windows take a
  second, whatever the number in flight; a step up whose rate is already more than ``2 x margin`` below the best
  is dropped on one answer. From the start the count doubles while the rate grows by more than ``margin``;
  if the first step up does not help, it halves while the rate stays within ``margin`` of the best (a server
  where concurrency does not help settles low); if it costs throughput (lower by more than ``margin``: each
  window slower than n-fold with n in flight), it goes to a quarter of the best count at once and halves on from
  there (such a server settles at 1 or 2, without a span at every count on the way down). Every
  ``reprobe`` spans at the settled count it tries one step up again, since a server's load changes.
* A 429/503 caps the count: as soon as it arrives, where the backend reports it (the openai backend), at the
  number of our requests the server held then (those in flight less those turned away); else when the answer
  reports it
  (:attr:`Generation.throttled <rearank.backends.base.Generation.throttled>`), just under the number that was in
  flight when that request was sent. A rate-limited API runs just under its limit.

Every change is logged (logger ``rearank.engine.concurrency``, INFO) with its reason.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from rearank.backends.base import AUTO, ERROR, Generation
from rearank.backends.metrics import ServerLoad
from rearank.errors import RearankError

log = logging.getLogger(__name__)

UP, DOWN, SETTLED = "up", "down", "settled"


def parse_concurrency(value: int | str) -> int | str:
    """``"auto"`` or a whole number >= 1 (from ``-O concurrency=...``); anything else is a one-line error."""
    if value == AUTO:
        return AUTO
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RearankError(f"concurrency must be {AUTO!r} or a whole number >= 1, got {value!r}")
    return value


@dataclass(frozen=True)
class Ticket:
    """What :meth:`InFlightLimit.sent` hands out, to give back to :meth:`InFlightLimit.record`: when the request
    was sent, the share clock then (the integral of 1 / windows in flight), the count's period, and how many were
    in flight with it."""

    sent_at: float
    shared: float
    period: int
    crowd: int


class InFlightLimit:
    """The number of windows in flight (:attr:`limit`): call :meth:`sent` for each request, :meth:`record` for each
    answer, :meth:`available` when the ready work changes, :meth:`observe` with the server's load and
    :meth:`turned_away` with 429/503 answers as they come.

    ``fixed``: a number that never changes; ``None`` (auto): the control above, between 1 and ``maximum``,
    from ``start``. ``clock`` is injectable for tests.
    """

    def __init__(self, fixed: int | None = None, *, start: int = 8, maximum: int = 256, margin: float = 0.1,
                 span: float = 1.0, reprobe: int = 8, high_kv: float = 0.9, poll_s: float = 1.0,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.fixed, self.margin, self.span, self.reprobe = fixed, margin, span, reprobe
        self.high_kv, self.poll_s, self.clock = high_kv, poll_s, clock
        self.cap = maximum
        self.limit = fixed if fixed is not None else max(1, min(start, maximum))
        self.ready = maximum  # windows the in-flight and ready queries can fill (the engine's report)
        self.in_flight = 0
        self.history: list[tuple[int, float]] = []  # (count, tokens/s) of every measured span
        self.load: ServerLoad | None = None  # the server's last reported load (None: it reports none)
        self.direction = UP
        self.peak = 0.0  # the best rate measured
        self.best = self.limit
        self.steady = 0  # spans at the settled count since the last probe
        self.reported = False  # 429/503s come through turned_away() as they arrive
        self._waited = False  # requests were waiting at the previous poll
        self.room: int | None = None  # the count at which requests last waited in the server's queue
        self._calm = 0  # polls since requests last waited
        self._shared, self._at = 0.0, clock()  # integral of 1 / in_flight over the time with windows in flight
        self._period = 0
        self._since, self._shared_since = self._at, 0.0
        self._before: float | None = None  # the rate measured in the previous period (None: not measured)
        self._rate: float | None = None  # the rate of the decision being taken
        self._raised = False  # this period began with a higher count (no backlog of windows sent before)
        self._samples: list[tuple[float, float, float]] = []  # (tokens, share of the server, latency) at this count

    @property
    def auto(self) -> bool:
        return self.fixed is None

    def _advance(self) -> float:
        now = self.clock()
        if self.in_flight:
            self._shared += (now - self._at) / self.in_flight
        self._at = now
        return now

    def sent(self) -> Ticket:
        """Note one request sent now."""
        now = self._advance()
        self.in_flight += 1
        return Ticket(now, self._shared, self._period, self.in_flight)

    def available(self, windows: int) -> None:
        """The windows in flight plus those the ready and not yet started queries can send now."""
        self.ready = max(1, windows)

    def record(self, ticket: Ticket, generation: Generation) -> None:
        """Note the answer of a request (``ticket``: what :meth:`sent` returned)."""
        now = self._advance()
        self.in_flight = max(0, self.in_flight - 1)
        if not self.auto:
            return
        if generation.throttled:
            if not self.reported:
                self._throttled(ticket.crowd)
            return
        if generation.finish_reason == ERROR or self.load is not None:
            return
        tokens = max(generation.completion_tokens, 1)
        share = self._shared - max(ticket.shared, self._shared_since)  # its share of the server at this count
        if ticket.period != self._period:  # sent before a raise, answered after it, mostly at the new count:
            earlier = self._shared_since - ticket.shared  # its tokens then came at the rate measured then
            if ticket.period != self._period - 1 or self._before is None or share < earlier or not self._raised:
                return
            tokens -= self._before * earlier
        self._samples.append((tokens, max(share, 1e-12), now - max(ticket.sent_at, self._since)))
        median = statistics.median(s[2] for s in self._samples)
        rate = max(sum(s[0] for s in self._samples), 0.0) / sum(s[1] for s in self._samples)
        if len(self._samples) >= 2 and now - self._since >= self.span * median:
            self._decide(rate)
        elif self.direction == UP and self.history and rate < self.peak * (1 - 2 * self.margin):
            self._decide(rate)  # a step up far worse than the best: no need to wait for a second answer

    def observe(self, load: ServerLoad | None) -> None:
        """The server's load from its metrics (None: it reports none, and the limit is found by measuring)."""
        self.load = load
        if not self.auto or load is None:
            return
        waited, self._waited = self._waited, load.waiting > 0
        room = load.kv_usage is None or load.kv_usage < self.high_kv
        if load.waiting > 1 and waited and self.in_flight <= self.limit:
            target = max(1, self.in_flight - load.waiting + 1)  # what it runs, and one queued for when one ends
            self.room, self._calm = target, 0
            self._set(target, f"{load.waiting} requests wait in the server's queue ({load.running} running)")
            return
        self._calm = self._calm + 1 if load.waiting == 0 else 0
        if self.room is not None and self._calm >= 4 * self.reprobe:
            self.room = None  # a long time without a queue: the server may take more again
        ceiling = min(self.cap, self.ready, self.room or self.cap)
        if load.waiting == 0 and room and ceiling > self.limit:
            usage = "" if load.kv_usage is None else f", KV cache {load.kv_usage:.0%} used"
            self._set(ceiling, f"nothing waits in the server ({load.running} running{usage}); "
                               f"{self.ready} windows ready")

    def _decide(self, rate: float) -> None:
        count = self.limit
        self.history.append((count, rate))
        self._rate = rate
        can_raise = count < self.cap and self.ready > count
        why = f"{rate:,.0f} tokens/s at {min(count, self.ready)} in flight"
        if self.direction == SETTLED:
            self.peak = rate  # the settled count's current figure: the server's load changes
            self.steady += 1
            if self.steady >= self.reprobe and can_raise:
                self.steady, self.direction = 0, UP
                self._set(min(2 * count, self.cap), f"{why}; trying one step up")
            else:
                self._set(count, why)
        elif not self.history[:-1] or (self.direction == UP and rate > self.peak * (1 + self.margin)):
            self.peak, self.best = max(rate, self.peak), count
            if can_raise:
                self._set(min(2 * count, self.cap), f"{why}, best so far")
            elif min(count, self.ready) > 1 and len(self.history) == 1:
                self.direction = DOWN
                self._set(max(1, min(count, self.ready) // 2), f"{why}; no room above (ready windows: "
                                                                 f"{self.ready}), trying fewer")
            else:
                self._settle(why)
        elif self.direction == UP and len(self.history) == 2 and self.best > 1:
            self.direction = DOWN  # the first step up did not help: fewer; far fewer where more cost throughput
            worse = rate < self.peak * (1 - self.margin)
            self._set(max(1, min(self.best, self.ready) // (4 if worse else 2)),
                      f"{why}, {'worse' if worse else 'not better'} than {self.peak:,.0f} at {self.best}; "
                      "trying fewer")
        elif self.direction == DOWN and rate >= self.peak * (1 - self.margin):
            self.peak, self.best = max(rate, self.peak), count
            if count > 1:
                self._set(max(1, count // 2), f"{why}, as good as more; trying fewer")
            else:
                self._settle(why)
        else:
            self._settle(f"{why}, best {self.peak:,.0f} at {self.best}")

    def _settle(self, why: str) -> None:
        self.direction, self.steady = SETTLED, 0
        self._set(self.best, f"{why}; settled")

    def turned_away(self, held: int) -> None:
        """The server answered 429/503 (too busy) while it held ``held`` of our requests (the backend retries).
        From then on an answer's own count of 429s is not read again."""
        self.reported = True
        if self.auto:
            self._cap(held, f"the server answered 429/503 while it held {held} of our requests")

    def _throttled(self, crowd: int) -> None:
        self._cap(crowd - 1, f"the server answered 429/503 (too busy) with {crowd} in flight")

    def _cap(self, cap: int, why: str) -> None:
        cap = max(1, cap)
        if cap >= self.cap:
            return
        self.cap = cap
        self.best = min(self.best, cap)
        self.direction, self.steady = SETTLED, 0
        self._set(min(self.limit, cap), why)

    def _set(self, limit: int, why: str) -> None:
        self._raised = limit > self.limit
        if limit != self.limit:
            log.info("concurrency %d -> %d: %s", self.limit, limit, why)
        self.limit = limit
        self._period += 1
        self._since = self._advance()
        self._shared_since = self._shared
        self._before, self._rate = self._rate, None
        self._samples = []
