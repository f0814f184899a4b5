"""The server's feed at its edges: capacity and its default, Retry-After from the last query's time (a fake clock),
what the request stream gives the engine in each state of the queue, stop's wait for a hung worker, the worker
thread's name, and the log line of a backend failure."""

from __future__ import annotations

import logging
import threading
from types import SimpleNamespace

import pytest

from rearank.backends.base import BackendBase, Generation
from rearank.engine import Engine
from rearank.errors import RearankError
from rearank.methods import Listwise
from rearank.server import Feed, Overloaded
from rearank.server import feed as feed_module
from rearank.types import Candidate, Query, Request, Result


class Unjudged(BackendBase):
    """A batch backend answering every window with the method's answer for unjudged passages (input order); it
    waits for :attr:`go` first, and raises :attr:`fail` when set."""

    name = "unjudged"

    def __init__(self, fail: Exception | None = None) -> None:
        self.fail = fail
        self.go = threading.Event()
        self.go.set()

    def answer_format(self, method):
        self.method = method
        return self

    def generate(self, prompts, settings):
        assert self.go.wait(60)
        if self.fail is not None:
            raise self.fail
        return [Generation(self.method.answer_text([0] * len(p.docids), 1), 10, 5) for p in prompts]


def engine(backend: BackendBase | None = None) -> Engine:
    return Engine(backend or Unjudged(), Listwise(window=4, step=2), batch_size=8)


def request(qid: str, n: int = 2) -> Request:
    return Request(Query(qid, "q"), tuple(Candidate(f"d{i}", float(n - i), f"text {i}") for i in range(n)))


class Answers:
    """``done`` callbacks recording each query's ranking order and error."""

    def __init__(self) -> None:
        self.got: dict[str, tuple[list[int] | None, str | None]] = {}
        self.events: dict[str, threading.Event] = {}

    def done_for(self, qid: str):
        self.events[qid] = threading.Event()

        def done(ranking, error):
            self.got[qid] = (ranking.order if ranking is not None else None, error)
            self.events[qid].set()
        return done

    def wait(self, qid: str) -> tuple[list[int] | None, str | None]:
        assert self.events[qid].wait(60)
        return self.got[qid]


def test_a_capacity_below_one_is_refused_and_one_takes_one_query():
    with pytest.raises(RearankError) as err:
        Feed(engine(), capacity=0)
    assert str(err.value) == "capacity must be at least 1, got 0"
    feed = Feed(engine(), capacity=1)  # not started: submissions only queue
    answers = Answers()
    feed.submit(request("a"), answers.done_for("a"))
    with pytest.raises(Overloaded) as full:
        feed.submit(request("b"), answers.done_for("b"))
    # before any query finished, a query is taken to last 1 s
    assert str(full.value) == "the server is at capacity (1 queries queued or running); retry after 1 s"
    assert full.value.retry_after == 1 and feed.load == 1


def test_the_default_capacity_is_256_queries():
    feed = Feed(engine())
    for i in range(256):
        feed.submit(request(f"q{i}"), lambda ranking, error: None)
    with pytest.raises(Overloaded, match=r"at capacity \(256 queries"):
        feed.submit(request("one-too-many"), lambda ranking, error: None)
    assert feed.load == 256


def test_retry_after_is_the_last_querys_time_rounded_up(monkeypatch):
    clock = SimpleNamespace(now=100.0)
    monkeypatch.setattr(feed_module, "time", SimpleNamespace(perf_counter=lambda: clock.now))
    backend = Unjudged()
    backend.go.clear()
    feed = Feed(engine(backend), capacity=1)
    answers = Answers()
    feed.start()
    feed.submit(request("a"), answers.done_for("a"))  # arrives at 100.0
    clock.now = 102.5
    backend.go.set()  # ... and is answered at 102.5: 2.5 s
    assert answers.wait("a") == ([0, 1], None)
    backend.go.clear()
    feed.submit(request("b"), answers.done_for("b"))
    with pytest.raises(Overloaded) as full:
        feed.submit(request("c"), answers.done_for("c"))
    assert full.value.retry_after == 3 and str(full.value).endswith("; retry after 3 s")
    backend.go.set()
    answers.wait("b")
    feed.stop()


class Blocks(Exception):
    """Raised where the stream would block (a condition's wait), so a test sees it without a second thread."""


class NeverWaits(threading.Condition):
    def wait(self, timeout=None):
        raise Blocks


def stream_feed(*, waiting: tuple[str, ...] = (), running: tuple[str, ...] = (), stopping: bool = False):
    """A feed (not started) whose queue holds ``waiting`` and ``running`` queries, its condition never waiting."""
    feed = Feed(engine(), capacity=10)
    answers = Answers()
    for qid in (*running, *waiting):
        feed.submit(request(qid), answers.done_for(qid))
    for qid in running:
        job = feed._waiting.popleft()
        feed._running[qid] = job
    feed._cond = NeverWaits()
    feed._stopping = stopping
    return feed, answers


def test_the_stream_blocks_while_no_query_waits_or_runs():
    feed, _ = stream_feed()
    with pytest.raises(Blocks):
        next(feed._stream())


def test_the_stream_gives_a_waiting_request_and_runs_it_until_its_result():
    feed, answers = stream_feed(waiting=("a",))
    given = next(feed._stream())
    assert given.query.qid == "a" and (len(feed._waiting), list(feed._running)) == (0, ["a"])
    swapped = Result(given.query, tuple(reversed(given.candidates)))
    feed._finished(swapped)
    assert answers.wait("a") == ([1, 0], None) and feed.load == 0


def test_the_stream_gives_none_while_queries_run_and_none_waits():
    feed, _ = stream_feed(running=("a",))
    assert next(feed._stream()) is None and list(feed._running) == ["a"]


def test_a_stopping_stream_starts_no_waiting_request():
    feed, _ = stream_feed(waiting=("b",), running=("a",), stopping=True)
    assert next(feed._stream()) is None
    assert [job.request.query.qid for job in feed._waiting] == ["b"] and list(feed._running) == ["a"]
    feed._running.clear()
    with pytest.raises(StopIteration):  # nothing running: the stream ends, the waiting one is stop's to answer
        next(feed._stream())


def test_a_result_for_a_query_already_answered_is_dropped():
    feed = Feed(engine())
    assert feed._finished(Result(Query("gone", "q"), ())) is None and feed.load == 0


class HungThread:
    """Stands in for a worker stuck in a backend call: alive, and its join records the timeout it was given."""

    def __init__(self) -> None:
        self.joined: list[float | None] = []

    def is_alive(self) -> bool:
        return True

    def join(self, timeout=None) -> None:
        self.joined.append(timeout)


def test_stop_waits_30_seconds_for_a_hung_worker_then_answers_every_query_left():
    feed = Feed(engine())
    answers = Answers()
    feed.submit(request("running"), answers.done_for("running"))
    feed._running["running"] = feed._waiting.popleft()
    feed.submit(request("waiting"), answers.done_for("waiting"))
    feed._thread = HungThread()
    feed.stop()
    assert feed._thread.joined == [30.0]
    assert answers.got == {"waiting": (None, "the server is shutting down"),
                           "running": (None, "the server is shutting down")}
    with pytest.raises(RearankError) as err:
        feed.submit(request("late"), answers.done_for("late"))
    assert str(err.value) == "the server is shutting down" and not isinstance(err.value, Overloaded)


def test_the_worker_is_a_daemon_thread_named_rearank_feed():
    feed = Feed(engine())
    feed.start()
    try:
        [worker] = [t for t in threading.enumerate() if t.name == "rearank-feed" and t is feed._thread]
        assert worker.daemon and worker.is_alive()
    finally:
        feed.stop()
    assert not worker.is_alive()


def test_a_backend_failure_is_logged_with_the_queries_it_hit(caplog):
    feed = Feed(engine(Unjudged(fail=RuntimeError("boom"))))
    answers = Answers()
    with caplog.at_level(logging.ERROR, logger="rearank.server"):
        feed.start()
        feed.submit(request("a"), answers.done_for("a"))
        assert answers.wait("a") == (None, "the backend failed (RuntimeError)")
        feed.stop()
    assert [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "rearank.server"] == [
        ("ERROR", "backend failed with 1 queries running: RuntimeError: boom")]
