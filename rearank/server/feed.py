"""The server's one running engine: every request's windows are fed into :meth:`rearank.engine.Engine.serve`.

A request is queued on arrival; the engine takes it as soon as it looks for work (before its next batch, or
as soon as a window in flight returns), so the windows of a small request share backend calls with those of a
large one already being ranked, and the small one is answered when its own windows are done, not when the
whole batch of requests it came with is. The queue counts queries waiting and running; past ``capacity`` a
submission is refused with :class:`Overloaded` (HTTP 429). When the backend raises, every unfinished request is
answered with the error (the caller keeps the input order and says so), and the engine starts again. The feed only
feeds the engine: the engine makes, counts and (on a batch backend) serialises every backend call.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from rearank.api import Ranking, ranking_of
from rearank.engine import Engine
from rearank.errors import RearankError
from rearank.types import Request, Result

log = logging.getLogger("rearank.server")

#: ``done(ranking, None)`` on success, ``done(None, message)`` when the backend failed.
Done = Callable[[Ranking | None, str | None], None]


class Overloaded(RearankError):
    """The queue is full; retry after :attr:`retry_after` seconds."""

    def __init__(self, capacity: int, retry_after: int) -> None:
        super().__init__(f"the server is at capacity ({capacity} queries queued or running); "
                         f"retry after {retry_after} s")
        self.retry_after = retry_after


@dataclass
class _Job:
    request: Request
    done: Done
    arrived: float


class Feed:
    """The worker thread running ``engine`` over the queue of submitted requests.

    :attr:`calls` counts the engine's backend calls and :attr:`largest_call` their most prompts (for tests and
    ``/health``).
    """

    def __init__(self, engine: Engine, *, capacity: int = 256) -> None:
        if capacity < 1:
            raise RearankError(f"capacity must be at least 1, got {capacity}")
        self.engine, self.capacity = engine, capacity
        self._waiting: deque[_Job] = deque()
        self._running: dict[str, _Job] = {}
        self._query_s = 1.0
        self._stopping = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._work, name="rearank-feed", daemon=True)

    @property
    def load(self) -> int:
        """Queries waiting or running."""
        return len(self._waiting) + len(self._running)

    @property
    def calls(self) -> int:
        """Backend calls the engine made."""
        return self.engine.counts.calls

    @property
    def largest_call(self) -> int:
        """The most prompts in one backend call."""
        return self.engine.counts.largest_call

    def start(self) -> None:
        """Start the worker thread."""
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Let the running queries finish, then stop; queued requests are answered with an error."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)
        with self._cond:
            left = [*self._waiting, *self._running.values()]
            self._waiting.clear()
            self._running.clear()
        for job in left:
            job.done(None, "the server is shutting down")

    def submit(self, request: Request, done: Done) -> None:
        """Queue one request; ``done`` is called from the worker thread. Raise :class:`Overloaded` when full."""
        with self._cond:
            if self._stopping:
                raise RearankError("the server is shutting down")
            if self.load >= self.capacity:
                raise Overloaded(self.capacity, max(1, math.ceil(self._query_s)))
            self._waiting.append(_Job(request, done, time.perf_counter()))
            self._cond.notify()

    def _stream(self) -> Iterator[Request | None]:
        """What :meth:`Engine.serve` reads: the next waiting request; None when none waits but some run; it
        blocks when none does either, and ends on :meth:`stop` once the running ones are finished."""
        while True:
            with self._cond:
                while not self._waiting and not self._running and not self._stopping:
                    self._cond.wait()
                if self._waiting and not self._stopping:
                    job = self._waiting.popleft()
                    self._running[job.request.query.qid] = job
                elif not self._running:
                    return
                else:
                    job = None
            yield job.request if job else None

    def _finished(self, result: Result) -> None:
        with self._cond:
            job = self._running.pop(result.query.qid, None)
        if job is None:  # answered already: the server stopped before it finished
            return
        self._query_s = time.perf_counter() - job.arrived
        job.done(ranking_of(job.request, result), None)

    def _work(self) -> None:
        while not self._stopping:
            try:
                self.engine.serve(self._stream(), self._finished)
            except Exception as err:  # noqa: BLE001 - any backend failure is answered, never kills the worker
                with self._cond:
                    failed = list(self._running.values())
                    self._running.clear()
                log.error("backend failed with %d queries running: %s: %s", len(failed), type(err).__name__, err)
                for job in failed:
                    job.done(None, f"the backend failed ({type(err).__name__})")
