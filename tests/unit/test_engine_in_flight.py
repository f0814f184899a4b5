"""Windows in flight: the same runs and traces as batches with a deterministic backend, the limit respected,
results streamed as queries finish, and the schedule chosen by the backend."""

import random
import re
import threading
import time

import pytest

from rearank.backends.base import BATCH, CONCURRENT, Generation, Prompt
from rearank.backends.oracle import OracleBackend
from rearank.engine import Engine
from rearank.errors import RearankError
from tests.engines import groupwise, listwise
from tests.unit.test_engine_listwise import SortingBackend, request, shuffled_worths


class Jittery(SortingBackend):
    """SortingBackend answering one prompt per call after a random pause, so answers come back out of order;
    records the most calls running at once."""

    calls = CONCURRENT

    def __init__(self, seed=0):
        super().__init__()
        self.random, self.lock = random.Random(seed), threading.Lock()
        self.running = self.most = 0

    def generate(self, prompts, settings):
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
            pause = self.random.uniform(0, 0.004)
        time.sleep(pause)
        try:
            return super().generate(prompts, settings)
        finally:
            with self.lock:
                self.running -= 1


def requests(n=12):
    return [request(f"q{i}", shuffled_worths(5 + 7 * i % 41, i)) for i in range(n)]


def plain(results):
    return [(r.query, r.candidates, [t.__class__(**{**t.__dict__, "latency_s": 0}) for t in r.traces])
            for r in results]


@pytest.mark.parametrize("concurrency", [1, 3, 8, "auto"])
def test_listwise_in_flight_equals_batches(concurrency):
    batched = listwise(SortingBackend(), window=6, step=3, batch_size=4).rerank(requests(), progress=False)
    backend = Jittery()
    engine = listwise(backend, window=6, step=3, concurrency=concurrency)
    assert engine.in_flight
    results = engine.rerank(requests(), progress=False)
    assert plain(results) == plain(batched)
    assert all(batch == 1 for batch in backend.batches)
    if concurrency != "auto":
        assert backend.most <= concurrency


def test_groupwise_in_flight_equals_batches():
    qrels = {r.query.qid: {c.docid: (i * 7) % 4 for i, c in enumerate(r.candidates)} for r in requests()}
    batched = groupwise(OracleBackend(qrels), group_size=4, shuffles=2).rerank(requests(), progress=False)
    in_flight = groupwise(OracleBackend(qrels), group_size=4, shuffles=2, in_flight=True,
                          concurrency=6).rerank(requests(), progress=False)
    assert plain(in_flight) == plain(batched)


def test_results_stream_as_queries_finish():
    seen = []
    results = listwise(Jittery(), window=4, step=2, concurrency=2).rerank(requests(), on_result=seen.append,
                                                                          progress=False)
    assert sorted(r.query.qid for r in seen) == sorted(r.query.qid for r in results)
    assert [r.query.qid for r in results] == [f"q{i}" for i in range(12)]  # returned in input order


def test_the_backend_chooses_the_schedule():
    assert listwise(Jittery()).in_flight and not listwise(SortingBackend()).in_flight
    assert SortingBackend.calls == BATCH
    assert not listwise(Jittery(), in_flight=False).in_flight


def test_bad_engine_settings_are_clear_errors():
    with pytest.raises(RearankError, match="concurrency must be"):
        listwise(Jittery(), concurrency=0)
    with pytest.raises(RearankError, match="batch_size must be at least 1"):
        listwise(SortingBackend(), batch_size=0)


def test_a_backend_error_in_flight_keeps_the_window_order():
    failing = request("qfail", shuffled_worths(12, 3), text="fail")
    [result] = listwise(Jittery(), window=6, step=3, concurrency=2).rerank([failing], progress=False)
    assert [c.docid for c in result.candidates] == [c.docid for c in failing.candidates]
    assert {t.status for t in result.traces} == {"error"}


def test_an_interrupt_does_not_wait_for_windows_in_flight():
    """Ctrl-C while windows are in flight: the engine stops at once (closing the backend ends the requests)
    instead of waiting for every outstanding answer."""
    release, finished = threading.Event(), []

    class Stalling(Jittery):
        def generate(self, prompts, settings):
            if "q0" not in prompts[0].messages[-1]["content"]:
                release.wait(30)  # a server that takes its time
                finished.append(prompts[0].qid)
            return super().generate(prompts, settings)

    def interrupt(result):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        listwise(Stalling(), window=4, step=2, concurrency=4).rerank(
            [request(f"q{i}", [1, 2, 3]) for i in range(4)], on_result=interrupt, progress=False)
    assert finished == []  # returned before any stalled window was answered
    release.set()


@pytest.mark.parametrize("concurrency, start", [("auto", 8), (3, None)])
def test_the_progress_bar_shows_autos_current_limit(capsys, concurrency, start):
    engine = listwise(Jittery(), window=6, step=3, concurrency=concurrency)
    engine.rerank(requests(4), progress=True)
    bar = capsys.readouterr().err
    assert "windows=" in bar
    shown = [int(n) for n in re.findall(r"in_flight=(\d+)", bar)]
    if start is None:
        assert shown == [] and engine.counts.limits == []
    else:
        # auto starts at 8 and may move while a loaded machine runs the test (the bar then shows 7 or 9, not 8);
        # whatever the bar shows is a limit auto used
        assert engine.counts.limits[0] == start
        assert shown and set(shown) <= set(engine.counts.limits)


class Echo:
    """Answers each prompt with its qid; records every call's size and the most calls running at once."""

    def __init__(self, calls=BATCH):
        self.calls = calls
        self.batches, self.lock, self.running, self.most = [], threading.Lock(), 0, 0

    def generate(self, prompts, settings):
        with self.lock:
            self.batches.append(len(prompts))
            self.running += 1
            self.most = max(self.most, self.running)
        time.sleep(random.Random(prompts[0].qid).uniform(0, 0.004) if self.calls == CONCURRENT else 0)
        with self.lock:
            self.running -= 1
        return [Generation(p.qid, 1, 1) for p in prompts]


def prompts(n):
    return [Prompt(messages=({"role": "user", "content": str(i)},), qid=f"p{i}") for i in range(n)]


def test_generate_gives_one_generation_per_prompt_in_order_in_batches():
    backend = Echo()
    out = Engine(backend, batch_size=3).generate(prompts(7))
    assert [g.text for g in out] == [f"p{i}" for i in range(7)]
    assert backend.batches == [3, 3, 1]


def test_generate_on_a_concurrent_backend_sends_prompts_in_flight_and_keeps_their_order():
    backend = Echo(CONCURRENT)
    engine = Engine(backend, batch_size=32, concurrency=3)
    assert engine.in_flight
    out = engine.generate(prompts(20))
    assert [g.text for g in out] == [f"p{i}" for i in range(20)]
    assert backend.batches == [1] * 20 and backend.most <= 3
    assert engine.counts.windows == 20


def test_an_engine_without_a_method_only_generates():
    engine = Engine(Echo())
    with pytest.raises(RearankError, match="without a method"):
        engine.rerank(requests(1), progress=False)
