"""The one reranking loop: many requests, a method that makes prompts, a backend that answers them.

The engine asks the method (:mod:`rearank.methods`) for the tasks each query has ready, sends them to the
backend, hands every generation back to the method, and emits each query's result as soon as it is finished
(``on_result``), so a caller can write results as they come and resume later. Two schedules:

* **batches** (backends whose ``calls`` is ``batch``: hf, vllm, the oracles): ``batch_size`` ready tasks from
  as many queries go to the backend in one call, and a query that finishes makes room for the next one, so an
  inference engine sees full batches;
* **in flight** (``concurrent`` backends: a server behind HTTP): up to ``concurrency`` tasks (the engine's
  setting, given by whoever builds it: a run's ``-O concurrency``) are outstanding at all times; a query's next
  window is sent as soon as its previous one returns, and no request waits for a round's slowest window.
  ``concurrency="auto"`` (the default) finds the count while the run goes on
  (:class:`rearank.engine.concurrency.InFlightLimit`): it starts from the backend's ``auto_start``, is told how many
  windows the ready queries can fill, reads the server's load every second from the backend's
  ``server_load()`` (vLLM's and SGLang's ``/metrics``) where the server reports one, and the backend's 429/503
  answers as they come (``throttles``, their count, and ``held_at_429``, how many of its requests the server held
  when it sent them).

With a deterministic backend both schedules give the same results and traces: a method's state depends only on
the answers, never on their order (listwise has one window of a query out at a time, or with ``tdpart`` applies
a round's windows in window order once all are answered; groupwise sums in group order).

Every backend call goes through the engine: it counts the calls (:class:`EngineCounts`) and, on a batch backend,
holds :attr:`Engine.lock` during each, so a caller sharing the backend outside the schedule (the server's chat
route, :meth:`Engine.call`) generates between the engine's own calls.

A :class:`rearank.engine.journal.Journal` makes a run resumable window by window: every answer is appended as
it arrives (a failed call is not: a resume sends it again), an answer already in the journal is replayed instead
of sent, and the journal is deleted when the run completes. A backend that hands a batch's answers back as they
come (``stream``, e.g. Ray, :mod:`rearank.backends.ray`) has each one journaled as it arrives, so a kill mid-batch
loses none of them.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from tqdm import tqdm

from rearank.backends.base import AUTO, BATCH, CONCURRENT, ERROR, Backend, Generation, Prompt, SamplingSettings
from rearank.engine.concurrency import InFlightLimit, Ticket, parse_concurrency
from rearank.engine.journal import Journal
from rearank.errors import RearankError
from rearank.methods.base import Method, Task
from rearank.types import Request, Result


def check_batch_size(value: object, name: str = "batch_size") -> None:
    """Raise :class:`RearankError` unless ``value`` is a whole number >= 1 (``name``: how the caller spells it)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RearankError(f"{name} must be at least 1, got {value!r}")


#: How often the in-flight loop of a stream (:meth:`Engine.serve`) looks for new requests, in seconds.
STREAM_POLL_S = 0.01
#: How often the in-flight loop looks at the backend's 429/503 answers (``throttles``), in seconds.
THROTTLE_CHECK_S = 0.05


@dataclass
class _Query:
    slot: int  # position in the input
    state: Any
    outstanding: int = 0
    digests: dict[int, str] = field(default_factory=dict)  # task index -> its prompt's digest


@dataclass
class EngineCounts:
    """For the progress bar, benchmarks and the server's ``/health``: windows answered, completion tokens, in-flight
    limits used (auto), backend calls made and the most prompts in one. The run's statistics are
    :class:`rearank.run.stats.RunStats`, counted from the traces."""

    windows: int = 0
    completion_tokens: int = 0
    limits: list[int] = field(default_factory=list)
    calls: int = 0
    largest_call: int = 0

    def add(self, generation: Generation) -> None:
        self.windows += 1
        self.completion_tokens += generation.completion_tokens


class Engine:
    """Rerank requests with ``method`` on ``backend``.

    ``batch_size``: tasks per backend call on a batch backend. ``in_flight``: None follows the backend (windows
    in flight on a ``concurrent`` backend, batches otherwise); False forces batches (lockstep rounds of
    ``batch_size`` even on a server), True forces windows in flight. ``concurrency``: tasks in flight, a number
    or ``"auto"`` (the default): the engine's own, never read from the backend. ``journal``: where answers are
    kept for resume (see the module docstring). The method gets the backend's tokenizer when it has none, and the
    backend answers in the method's format (the oracles). :attr:`lock` is held during each call of a batch backend.
    """

    def __init__(self, backend: Backend, method: Method | None = None, settings: SamplingSettings | None = None, *,
                 batch_size: int = 32, in_flight: bool | None = None, concurrency: int | str = AUTO,
                 journal: Journal | None = None) -> None:
        check_batch_size(batch_size)
        if method is not None and method.tokenizer is None and backend.tokenizer is not None:
            method = replace(method, tokenizer=backend.tokenizer)  # type: ignore[type-var]
        self._method = method
        self.backend = backend.answer_format(method) if method is not None else backend
        self.settings = settings or SamplingSettings()
        self.batch_size = batch_size
        # a backend with only ``generate`` (a reader's duck-typed one) has BackendBase's defaults
        calls = getattr(backend, "calls", BATCH)
        self.in_flight = calls == CONCURRENT if in_flight is None else in_flight
        self.concurrency = parse_concurrency(concurrency)
        self.counts = EngineCounts()
        self.journal = journal
        self.lock = threading.Lock()
        self._serial = calls == BATCH  # a batch backend takes one call at a time
        self._counting = threading.Lock()

    @property
    def method(self) -> Method:
        """The method reranking runs (:meth:`rerank`, :meth:`serve`); an engine built without one only generates."""
        if self._method is None:
            raise RearankError("this engine was built without a method: it can only generate (Engine.generate)")
        return self._method

    def generate(self, prompts: Sequence[Prompt], progress: bool = False, desc: str = "generate") -> list[Generation]:
        """One generation per prompt, in order, by the same schedule as reranking (``batch_size`` prompts a call
        on a batch backend, prompts in flight on a concurrent one): how readers, the BAR-RAG selector and the
        judge call a backend."""
        out: list[Generation | None] = [None] * len(prompts)
        bar = tqdm(total=len(prompts), unit="prompt", disable=not progress, desc=desc, dynamic_ncols=True)

        def answered(query: _Query, task: Task, generation: Generation) -> list[Task]:
            self.counts.add(generation)
            out[query.slot] = generation
            bar.update(1)
            return []

        starts = ((_Query(slot, None, 1), [Task(0, prompt)]) for slot, prompt in enumerate(prompts))
        try:
            self._run(starts, answered, total=len(prompts))
        finally:
            bar.close()
        return [g for g in out if g is not None]

    def call(self, prompts: Sequence[Prompt], settings: SamplingSettings) -> list[Generation]:
        """One backend call with ``settings``, outside the schedule (the server's chat route): counted, and on a
        batch backend made between the engine's own calls."""
        with self._calling(len(prompts)):
            return self._checked(self.backend.generate(prompts, settings), len(prompts))

    @contextmanager
    def _calling(self, n: int) -> Iterator[None]:
        """Count one backend call of ``n`` prompts; on a batch backend, hold :attr:`lock` while it runs."""
        with self._counting:
            self.counts.calls += 1
            self.counts.largest_call = max(self.counts.largest_call, n)
        if not self._serial:
            yield
            return
        with self.lock:
            yield

    def rerank(self, requests: Sequence[Request], on_result: Callable[[Result], None] | None = None,
               progress: bool = True) -> list[Result]:
        """Rerank every request; return results in input order, calling ``on_result`` as each query finishes.
        The journal, if any, is closed at the end, and deleted when every request finished."""
        results: list[Result | None] = [None] * len(requests)
        bar = tqdm(total=len(requests), unit="query", disable=not progress, desc=f"rerank {self.method.name}",
                   dynamic_ncols=True)
        started = time.perf_counter()

        def finish(query: _Query) -> None:
            results[query.slot] = result = self._result(query)
            if on_result is not None:
                on_result(result)
            bar.update(1)

        def answered(query: _Query, task: Task, generation: Generation) -> list[Task]:
            ready = self._apply(query, task, generation, finish)
            elapsed = max(time.perf_counter() - started, 1e-9)
            limit = {"in_flight": self.counts.limits[-1]} if self.counts.limits else {}  # auto's current limit
            bar.set_postfix(windows=self.counts.windows, tok_s=f"{self.counts.completion_tokens / elapsed:.1f}",
                            **limit, refresh=False)
            return ready

        complete = False
        try:
            self._run(self._starts(enumerate(requests), finish), answered, total=len(requests))
            complete = True
        finally:
            bar.close()
            if self.journal is not None:
                self.journal.close(remove=complete)
        return [r for r in results if r is not None]

    def serve(self, stream: Iterable[Request | None], on_result: Callable[[Result], None]) -> None:
        """Rerank requests as ``stream`` gives them, until it ends: one running engine for requests that come
        and go (the server's, :mod:`rearank.server.feed`).

        ``stream`` gives a request, or None when no request is waiting but some it gave are not finished yet
        (while none is waiting and none is unfinished it blocks), so a request that arrives while others are
        being ranked has its tasks join theirs, in the next batch or as soon as a window in flight returns,
        instead of waiting for them to finish. ``on_result`` gets each result as its query finishes.
        """
        def finish(query: _Query) -> None:
            on_result(self._result(query))

        starts = self._starts(((slot, request) for slot, request in enumerate(stream)), finish)
        self._run(starts, functools.partial(self._apply, finish=finish), total=None)

    def _result(self, query: _Query) -> Result:
        """The method's result of a finished query, each trace with the digest of the prompt its window was sent
        (a window's task index is its trace's position)."""
        result = self.method.result(query.state)
        traces = tuple(replace(trace, prompt_digest=query.digests.get(i, trace.prompt_digest))
                       for i, trace in enumerate(result.traces))
        return replace(result, traces=traces)

    def _apply(self, query: _Query, task: Task, generation: Generation,
               finish: Callable[[_Query], None]) -> list[Task]:
        """Hand ``generation`` to the method; ``finish`` the query once none of its tasks is outstanding."""
        self.counts.add(generation)
        query.outstanding -= 1
        query.digests[task.index] = task.prompt.digest()
        ready = self.method.apply(query.state, task, generation)
        query.outstanding += len(ready)
        if not query.outstanding:
            finish(query)
        return ready

    def _run(self, starts: Iterator[tuple[_Query, list[Task]] | None],
             answered: Callable[[_Query, Task, Generation], list[Task]], total: int | None) -> None:
        """Send the tasks ``starts`` gives by the engine's schedule: in flight, or in batches."""
        if self.in_flight:
            self._in_flight(starts, answered, total=total)
        else:
            self._batches(starts, answered)

    def close(self) -> None:
        """Release the backend (vLLM's engine processes, HTTP connections)."""
        self.backend.close()

    def _starts(self, requests: Iterable[tuple[int, Request | None]],
                finish: Callable[[_Query], None]) -> Iterator[tuple[_Query, list[Task]] | None]:
        """Each request started, with its ready tasks; a request with none is finished at once. None passes
        through: no request is waiting now (:meth:`serve`)."""
        for slot, request in requests:
            if request is None:
                yield None
                continue
            state, ready = self.method.start(request)
            query = _Query(slot, state, len(ready))
            if ready:
                yield query, ready
            else:
                finish(query)

    def _batches(self, starts: Iterator[tuple[_Query, list[Task]] | None],
                 answered: Callable[[_Query, Task, Generation], list[Task]]) -> None:
        queue: deque[tuple[_Query, Task]] = deque()
        while True:
            while len(queue) < self.batch_size:
                started = next(starts, None)  # None: none left, or (serve) none waiting now
                if started is None:
                    break
                queue.extend((started[0], task) for task in started[1])
            if not queue:
                return
            batch = [queue.popleft() for _ in range(min(self.batch_size, len(queue)))]
            generations = self._generate([task for _, task in batch])
            for (query, task), generation in zip(batch, generations):
                queue.extend((query, ready) for ready in answered(query, task, generation))

    def _in_flight(self, starts: Iterator[tuple[_Query, list[Task]] | None],
                   answered: Callable[[_Query, Task, Generation], list[Task]], total: int | None) -> None:
        """``total``: the requests ``starts`` gives, None for a stream (:meth:`serve`), which is looked at again
        every :data:`STREAM_POLL_S` while windows are in flight."""
        fixed = None if self.concurrency == AUTO else int(self.concurrency)
        limit = InFlightLimit(fixed, start=getattr(self.backend, "auto_start", 8))
        load: Callable[[], Any] | None = getattr(self.backend, "server_load", None) if limit.auto else None
        polled = -limit.poll_s
        throttled = limit.auto and hasattr(self.backend, "held_at_429")  # the backend reports 429/503s as they come
        seen = getattr(self.backend, "throttles", 0)
        queue: deque[tuple[_Query, Task]] = deque()
        running: dict[Future[list[Generation]], tuple[_Query, Task, Ticket]] = {}
        pool = ThreadPoolExecutor(max_workers=fixed or limit.cap, thread_name_prefix="rearank-window")
        unstarted = total or 0
        finished = False
        if limit.auto:
            self.counts.limits.append(limit.limit)
        try:
            while True:
                limit.available(len(running) + len(queue) + unstarted)
                if load is not None and time.perf_counter() - polled >= limit.poll_s:
                    polled = time.perf_counter()
                    limit.observe(load())
                    if limit.load is None:
                        load = None  # the server reports no load: the limit is found by measuring
                while len(running) < limit.limit:
                    if not queue:
                        started = next(starts, None)  # None: none left, or (serve) none waiting now
                        if started is None:
                            break
                        unstarted -= total is not None
                        queue.extend((started[0], task) for task in started[1])
                    query, task = queue.popleft()
                    known = self._journaled(task)
                    if known is not None:  # resumed: answered by the journal, not sent
                        queue.extendleft((query, ready) for ready in reversed(answered(query, task, known)))
                        continue
                    future = pool.submit(self._generate, [task])
                    running[future] = (query, task, limit.sent())
                if not running:
                    finished = True
                    return
                wake = [limit.poll_s] * (load is not None) + [THROTTLE_CHECK_S] * throttled + [STREAM_POLL_S] * (total is None)
                done, _ = wait(running, timeout=min(wake, default=None), return_when=FIRST_COMPLETED)
                if throttled and self.backend.throttles > seen:  # in flight less those turned away, or fewer
                    held = limit.in_flight - (self.backend.throttles - seen)
                    limit.turned_away(min(held, self.backend.held_at_429 or held))
                    seen = self.backend.throttles
                for future in done:
                    query, task, ticket = running.pop(future)
                    (generation,) = self._checked(future.result(), 1)
                    limit.record(ticket, generation)
                    queue.extendleft((query, ready) for ready in reversed(answered(query, task, generation)))
                if limit.auto and (not self.counts.limits or self.counts.limits[-1] != limit.limit):
                    self.counts.limits.append(limit.limit)
        finally:
            # interrupted: do not wait for requests in flight (closing the backend ends them)
            pool.shutdown(wait=finished, cancel_futures=True)

    def _journaled(self, task: Task) -> Generation | None:
        """The journal's answer to ``task``, if it has one."""
        return None if self.journal is None else self.journal.entries.get((task.prompt.qid, task.index))

    def _generate(self, tasks: list[Task]) -> list[Generation]:
        """Answers to ``tasks`` in order: from the journal where it has them, else from the backend (journaled)."""
        out = [self._journaled(task) for task in tasks]
        todo = [i for i, known in enumerate(out) if known is None]
        if not todo:
            return out  # type: ignore[return-value]
        prompts = [tasks[i].prompt for i in todo]
        stream = getattr(self.backend, "stream", None)
        with self._calling(len(prompts)):
            answers = (stream(prompts, self.settings) if stream is not None
                       else enumerate(self._checked(self.backend.generate(prompts, self.settings), len(prompts))))
            for row, generation in answers:
                task = tasks[todo[row]]
                out[todo[row]] = generation
                if self.journal is not None and generation.finish_reason != ERROR:  # a failed call is retried
                    self.journal.add(task.prompt.qid, task.index, generation)
        missing = [tasks[i] for i in todo if out[i] is None]
        if missing:
            raise RearankError(f"backend {self.backend.name!r} returned nothing for {len(missing)} windows (first: "
                               f"query {missing[0].prompt.qid!r}, window {missing[0].index})")
        return out  # type: ignore[return-value]

    def _checked(self, generations: Sequence[Generation], expected: int) -> list[Generation]:
        if len(generations) != expected:
            raise RearankError(f"backend {self.backend.name!r} returned {len(generations)} generations for "
                               f"{expected} prompts")
        return list(generations)
