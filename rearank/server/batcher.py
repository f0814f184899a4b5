"""Cross-request batching: one background worker drains a bounded queue into one ``rerank_many`` call.

Requests that arrive while a batch runs wait in the queue; when the batch ends, the worker takes every waiting
request (up to ``max_batch``) and reranks them together, so the windows of concurrent requests share backend
calls. The queue counts queries waiting and running; past ``capacity`` a submission is refused with
:class:`Overloaded` (HTTP 429). A batch whose ``rerank_many`` raises answers each of its unfinished requests
with the error, so the caller can keep the input order and say so.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rearank.api import Ranking
from rearank.errors import RearankError
from rearank.types import Request

log = logging.getLogger("rearank.server")

#: ``done(ranking, None)`` on success, ``done(None, message)`` when the backend failed.
Done = Callable[[Ranking | None, str | None], None]
RerankMany = Callable[[Sequence[Request], Callable[[Ranking], None]], object]


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


class Batcher:
    """The worker thread and its bounded queue over ``rerank_many(requests, on_result)``.

    ``lock`` is held while a batch runs, so other users of the same backend (the chat route) wait for it.
    :attr:`batches` counts ``rerank_many`` calls and :attr:`largest_batch` their largest size (for tests and
    ``/health``).
    """

    def __init__(self, rerank_many: RerankMany, *, capacity: int = 256, max_batch: int = 64,
                 lock: threading.Lock | None = None) -> None:
        if capacity < 1 or max_batch < 1:
            raise RearankError(f"capacity and max_batch must be at least 1, got {capacity} and {max_batch}")
        self.rerank_many = rerank_many
        self.capacity, self.max_batch = capacity, max_batch
        self.lock = lock or threading.Lock()
        self.batches = self.largest_batch = 0
        self._queue: deque[_Job] = deque()
        self._running = 0
        self._last_batch_s = 1.0
        self._stopping = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._work, name="rearank-batcher", daemon=True)

    @property
    def load(self) -> int:
        """Queries waiting or running."""
        return len(self._queue) + self._running

    def start(self) -> None:
        """Start the worker thread."""
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Let the running batch finish, then stop; queued requests are answered with an error."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)
        while self._queue:
            self._queue.popleft().done(None, "the server is shutting down")

    def submit(self, request: Request, done: Done) -> None:
        """Queue one request; ``done`` is called from the worker thread. Raise :class:`Overloaded` when full."""
        with self._cond:
            if self._stopping:
                raise RearankError("the server is shutting down")
            if self.load >= self.capacity:
                raise Overloaded(self.capacity, max(1, math.ceil(self._last_batch_s)))
            self._queue.append(_Job(request, done))
            self._cond.notify()

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                batch = [self._queue.popleft() for _ in range(min(self.max_batch, len(self._queue)))]
                self._running = len(batch)
            self._run(batch)
            with self._cond:
                self._running = 0

    def _run(self, batch: list[_Job]) -> None:
        jobs = {job.request.query.qid: job for job in batch}
        finished: set[str] = set()

        def on_result(ranking: Ranking) -> None:
            finished.add(ranking.query.qid)
            jobs[ranking.query.qid].done(ranking, None)

        started = time.perf_counter()
        try:
            with self.lock:
                self.batches += 1
                self.largest_batch = max(self.largest_batch, len(batch))
                self.rerank_many([job.request for job in batch], on_result)
        except Exception as err:  # noqa: BLE001 - any backend failure is answered, never crashes the worker
            log.error("backend failed on a batch of %d queries: %s: %s", len(batch), type(err).__name__, err)
            for qid, job in jobs.items():
                if qid not in finished:
                    job.done(None, f"the backend failed ({type(err).__name__})")
        finally:
            self._last_batch_s = time.perf_counter() - started
