"""The server's feed: one running engine takes every request's windows, so a small request that arrives while a
large one is being ranked shares its next backend call and is answered first; a full queue refuses; a backend
failure answers the requests it hit and the engine goes on."""

from __future__ import annotations

import threading

import pytest

from rearank.backends.base import BATCH, CONCURRENT, BackendBase, Generation, Prompt, SamplingSettings
from rearank.engine import Engine
from rearank.methods import Listwise
from rearank.server import Feed, Overloaded
from rearank.types import Candidate, Query, Request


class SteppedBackend(BackendBase):
    """A slow batch backend the test drives: each call records its prompts' qids, says it started, and waits
    for one :meth:`step`; it answers every window with the method's answer for unjudged passages."""

    name = "stepped"

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.calls: list[list[str]] = []
        self.entered = threading.Semaphore(0)
        self._steps = threading.Semaphore(0)

    def answer_format(self, method):
        self.method = method
        return self

    def generate(self, prompts, settings):
        self.calls.append([p.qid for p in prompts])
        self.entered.release()
        assert self._steps.acquire(timeout=60)
        if self.fail:
            raise RuntimeError("boom")
        return [Generation(self.method.answer_text([0] * len(p.docids), 1), 10, 5) for p in prompts]

    def step(self) -> None:
        """Let one call finish, after waiting (10 s at most) until it has started."""
        assert self.entered.acquire(timeout=60)
        self._steps.release()


def request(qid: str, n: int) -> Request:
    return Request(Query(qid, "q"), tuple(Candidate(f"d{i}", float(n - i), f"text {i}") for i in range(n)))


class Answers:
    def __init__(self) -> None:
        self.order: list[str] = []
        self.errors: dict[str, str] = {}
        self.lock = threading.Lock()
        self.events: dict[str, threading.Event] = {}

    def done_for(self, qid: str):
        self.events[qid] = threading.Event()

        def done(ranking, error):
            with self.lock:
                self.order.append(qid)
                if error:
                    self.errors[qid] = error
            self.events[qid].set()
        return done

    def wait(self, qid: str) -> None:
        assert self.events[qid].wait(60)


def test_a_small_request_joins_the_next_call_and_is_answered_before_the_large_one():
    backend = SteppedBackend()
    feed = Feed(Engine(backend, Listwise(window=4, step=2, top_k=100), batch_size=8), capacity=10)
    answers = Answers()
    feed.start()
    feed.submit(request("large", 20), answers.done_for("large"))  # 9 windows, one after the other
    assert backend.entered.acquire(timeout=60)
    backend.entered.release()  # the first call (window 1 of large) is running ...
    feed.submit(request("small", 4), answers.done_for("small"))  # ... when a one-window request arrives
    backend.step()  # call 1 ends
    backend.step()  # call 2: large's window 2 and small's only window
    answers.wait("small")
    assert answers.order == ["small"] and feed.load == 1  # answered while large still has 7 windows to go
    for _ in range(7):
        backend.step()
    answers.wait("large")
    feed.stop()
    assert backend.calls[:2] == [["large"], ["large", "small"]]
    assert len(backend.calls) == 9 and answers.order == ["small", "large"] and answers.errors == {}
    assert (feed.calls, feed.largest_call) == (9, 2)


def test_full_queue_refuses_then_frees():
    backend = SteppedBackend()
    feed = Feed(Engine(backend, Listwise(window=4, step=2), batch_size=8), capacity=2)
    answers = Answers()
    feed.start()
    feed.submit(request("a", 4), answers.done_for("a"))
    feed.submit(request("b", 4), answers.done_for("b"))
    with pytest.raises(Overloaded, match=r"at capacity \(2 queries") as err:
        feed.submit(request("c", 4), answers.done_for("c"))
    assert err.value.retry_after >= 1
    backend.step()  # a alone, or a and b in one call (b may arrive before the first call)
    answers.wait("a")
    if len(backend.calls) == 1 and backend.calls[0] == ["a"]:
        backend.step()
    answers.wait("b")
    assert feed.load == 0
    feed.submit(request("c", 4), answers.done_for("c"))
    backend.step()
    answers.wait("c")
    feed.stop()
    assert sorted(answers.order) == ["a", "b", "c"] and answers.errors == {}


def test_a_backend_failure_answers_the_running_requests_and_the_engine_goes_on():
    backend = SteppedBackend(fail=True)
    feed = Feed(Engine(backend, Listwise(window=4, step=2), batch_size=8))
    answers = Answers()
    feed.start()
    feed.submit(request("a", 4), answers.done_for("a"))
    backend.step()
    answers.wait("a")
    assert answers.errors == {"a": "the backend failed (RuntimeError)"}
    backend.fail = False
    feed.submit(request("b", 4), answers.done_for("b"))
    backend.step()
    answers.wait("b")
    feed.stop()
    assert answers.order == ["a", "b"] and "b" not in answers.errors and feed.load == 0


def test_stop_answers_the_waiting_requests():
    backend = SteppedBackend()
    feed = Feed(Engine(backend, Listwise(window=4, step=2), batch_size=1), capacity=10)
    answers = Answers()
    feed.start()
    feed.submit(request("a", 6), answers.done_for("a"))  # 2 windows
    assert backend.entered.acquire(timeout=60)
    backend.entered.release()
    feed.submit(request("b", 4), answers.done_for("b"))
    stopper = threading.Thread(target=feed.stop)
    stopper.start()
    with feed._cond:  # until stop() has said so (it notifies, then waits for the running query)
        assert feed._cond.wait_for(lambda: feed._stopping, timeout=60)
    backend.step()  # a's first window; b is never started: the feed is stopping
    backend.step()  # a's second window
    stopper.join(60)
    assert answers.order == ["a", "b"] and answers.errors == {"b": "the server is shutting down"}
    with pytest.raises(Exception, match="shutting down"):
        feed.submit(request("c", 4), answers.done_for("c"))


class HeldBackend(BackendBase):
    """A concurrent backend (a server behind HTTP): each window waits until its query is let go."""

    name, calls = "held", CONCURRENT

    def __init__(self) -> None:
        self.go = {"large": threading.Event(), "small": threading.Event()}
        self.sent: list[str] = []

    def answer_format(self, method):
        self.method = method
        return self

    def generate(self, prompts, settings):
        (prompt,) = prompts
        self.sent.append(prompt.qid)
        assert self.go[prompt.qid].wait(60)
        return [Generation(self.method.answer_text([0] * len(prompt.docids), 1), 10, 5)]


def test_windows_in_flight_a_small_request_is_sent_at_once_and_answered_while_the_large_one_waits():
    backend = HeldBackend()
    engine = Engine(backend, Listwise(window=4, step=2), concurrency=4)  # both queries' first windows go out at once
    feed = Feed(engine, capacity=10)
    answers = Answers()
    feed.start()
    feed.submit(request("large", 20), answers.done_for("large"))
    feed.submit(request("small", 4), answers.done_for("small"))
    backend.go["small"].set()  # the large one's first window is still out
    answers.wait("small")
    assert answers.order == ["small"] and backend.sent[:2] in (["large", "small"], ["small", "large"])
    backend.go["large"].set()
    answers.wait("large")
    feed.stop()
    assert answers.order == ["small", "large"] and backend.sent.count("large") == 9 and answers.errors == {}


class Watching(BackendBase):
    """Records, in each call, its size and whether the engine's lock is held; answers "yes"."""

    def __init__(self, calls: str) -> None:
        self.calls, self.sizes, self.held = calls, [], []
        self.engine: Engine | None = None

    def generate(self, prompts, settings):
        self.sizes.append(len(prompts))
        self.held.append(self.engine.lock.locked())
        return [Generation("yes", 1, 1) for _ in prompts]


@pytest.mark.parametrize("calls", [BATCH, CONCURRENT])
def test_the_engine_makes_and_counts_every_backend_call_and_serialises_a_batch_backends(calls):
    # the server's chat route calls through the engine (Engine.call), between the calls of its schedule
    backend = Watching(calls)
    engine = backend.engine = Engine(backend, batch_size=4, concurrency=2)
    prompts = [Prompt(messages=({"role": "user", "content": str(i)},), qid=f"p{i}") for i in range(6)]
    assert [g.text for g in engine.generate(prompts)] == ["yes"] * 6
    assert [g.text for g in engine.call(prompts[:3], SamplingSettings(max_new_tokens=8))] == ["yes"] * 3
    assert backend.sizes == ([4, 2, 3] if calls == BATCH else [1] * 6 + [3])
    assert set(backend.held) == {calls == BATCH}  # the lock is the batch backend's only
    assert (engine.counts.calls, engine.counts.largest_call) == (len(backend.sizes), max(backend.sizes))
