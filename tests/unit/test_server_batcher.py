"""The server's batch worker: concurrent requests share backend calls; a full queue refuses; failures answer."""

from __future__ import annotations

import threading

import pytest

from rearank.api import Reranker
from rearank.server import Batcher, Overloaded
from rearank.types import Candidate, Query, Request

QRELS = {f"q{i}": {"b": 1} for i in range(5)}


def request(i: int) -> Request:
    return Request(Query(f"q{i}", "query"), (Candidate("a", 2.0, "A"), Candidate("b", 1.0, "B")))


class Gate:
    """Wraps rerank_many: the first call signals ``entered`` and waits for ``release``."""

    def __init__(self, rerank_many):
        self.rerank_many = rerank_many
        self.entered, self.release = threading.Event(), threading.Event()
        self.sizes: list[int] = []

    def __call__(self, requests, on_result):
        self.sizes.append(len(requests))
        self.entered.set()
        assert self.release.wait(10)
        return self.rerank_many(requests, on_result)


def collect(answers: dict, lock: threading.Lock, done_all: threading.Event, expected: int):
    def done(ranking, error):
        with lock:
            answers[ranking.query.qid if ranking else len(answers)] = ranking.docids if ranking else error
            if len(answers) == expected:
                done_all.set()
    return done


def test_requests_waiting_during_a_batch_go_to_the_backend_together():
    rr = Reranker(backend="oracle", qrels=QRELS)
    prompts_per_call: list[int] = []
    generate = rr.backend.generate
    rr.backend.generate = lambda prompts, settings: prompts_per_call.append(len(prompts)) or generate(prompts, settings)
    gate = Gate(rr.rerank_many)
    batcher = Batcher(gate, capacity=10)
    answers: dict = {}
    lock, done_all = threading.Lock(), threading.Event()
    done = collect(answers, lock, done_all, 5)
    batcher.start()
    batcher.submit(request(0), done)
    assert gate.entered.wait(10)  # the worker runs a batch of q0 ...
    for i in range(1, 5):  # ... while four more arrive
        batcher.submit(request(i), done)
    assert batcher.load == 5
    gate.release.set()
    assert done_all.wait(10)
    batcher.stop()
    assert gate.sizes == [1, 4]  # two rerank_many calls: q0, then the four that waited
    assert prompts_per_call == [1, 4]  # one window each: the four share one backend call
    assert answers == {f"q{i}": ["b", "a"] for i in range(5)}
    assert (batcher.batches, batcher.largest_batch) == (2, 4)


def test_full_queue_refuses_and_max_batch_splits():
    rr = Reranker(backend="oracle", qrels=QRELS)
    gate = Gate(rr.rerank_many)
    batcher = Batcher(gate, capacity=3, max_batch=1)
    answers: dict = {}
    lock, done_all = threading.Lock(), threading.Event()
    done = collect(answers, lock, done_all, 3)
    batcher.start()
    batcher.submit(request(0), done)
    assert gate.entered.wait(10)
    batcher.submit(request(1), done)
    batcher.submit(request(2), done)
    with pytest.raises(Overloaded, match=r"at capacity \(3 queries") as err:
        batcher.submit(request(3), done)
    assert err.value.retry_after >= 1
    gate.release.set()
    assert done_all.wait(10)
    batcher.stop()
    assert gate.sizes == [1, 1, 1] and sorted(answers) == ["q0", "q1", "q2"]


def test_a_failing_batch_answers_every_request_with_the_error():
    def broken(requests, on_result):
        raise RuntimeError("boom")

    batcher = Batcher(broken)
    answers: dict = {}
    lock, done_all = threading.Lock(), threading.Event()
    batcher.start()
    batcher.submit(request(0), collect(answers, lock, done_all, 1))
    assert done_all.wait(10)
    batcher.stop()
    assert answers == {0: "the backend failed (RuntimeError)"}
