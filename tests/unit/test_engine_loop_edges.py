"""The in-flight loop's wiring, on fakes the test drives: a clock it moves, a thread pool that runs a window only
when the fake ``wait`` answers it (the oldest first, one a wait), and the real limit on that clock with what it is
told recorded. Pins the pool, the ready windows, the server's load, the 429s, the waits' timeouts, the limits
counted and how the pool is shut; a loop that never ends fails at its 50th wait instead of hanging."""

from __future__ import annotations

import re
from concurrent.futures import ALL_COMPLETED, FIRST_COMPLETED, Future
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

from rearank.backends.base import AUTO, CONCURRENT, BackendBase, Generation, Prompt, SamplingSettings
from rearank.backends.metrics import ServerLoad
from rearank.engine import STREAM_POLL_S, THROTTLE_CHECK_S, Engine, check_batch_size, loop
from rearank.engine.concurrency import InFlightLimit
from rearank.engine.journal import Journal
from rearank.errors import RearankError
from rearank.methods.base import Task
from rearank.run.config import RunConfig
from rearank.types import Query, Request, Result
from tests.methods import request
from tests.unit.test_engine_generate_edges import BARS, Bar


@dataclass(frozen=True)
class Fan:
    """A method whose tasks are all ready at the start, task i asking about candidate i; its result holds the
    candidates whose task was answered with their docid, in task order."""

    name: str = "fan"
    tokenizer: Any = None

    def start(self, req):
        return (req, {}), [Task(i, Prompt(({"role": "user", "content": c.docid},), qid=req.query.qid))
                           for i, c in enumerate(req.candidates)]

    def apply(self, state, task, generation):
        state[1][task.index] = generation
        return []

    def result(self, state):
        req, answers = state
        return Result(req.query, tuple(req.candidates[i] for i in sorted(answers)
                                       if answers[i].text == req.candidates[i].docid))


class Server(BackendBase):
    """A concurrent backend answering each prompt with its content (1 completion token); records the settings of
    each call and the methods it was asked to answer for. With ``loads`` it reports the server's load, one a poll
    in turn; with ``throttles`` it counts 429s (the test raises them); ``attributes``: ``concurrency``,
    ``auto_start``, ``tokenizer``."""

    name, calls = "server", CONCURRENT

    def __init__(self, loads: list | None = None, throttles: int | None = None, **attributes):
        self.settings: list[SamplingSettings] = []
        self.formats: list = []
        if loads is not None:
            self.server_load = lambda: loads.pop(0)
        if throttles is not None:
            self.throttles, self.held_at_429 = throttles, None
        for name, value in attributes.items():
            setattr(self, name, value)

    def answer_format(self, method):
        self.formats.append(method)
        return self

    def generate(self, prompts, settings):
        self.settings.append(settings)
        return [Generation(p.messages[0]["content"], 1, 1) for p in prompts]


class Bare:
    """A duck-typed backend (a reader's): ``generate`` alone; records each call's size, settings and whether the
    engine's lock was held."""

    def __init__(self):
        self.engine: Engine | None = None
        self.seen: list = []

    def generate(self, prompts, settings):
        self.seen.append((len(prompts), settings, self.engine.lock.locked()))
        return [Generation("x", 1, 1) for _ in prompts]


class Streaming(BackendBase):
    """A batch backend that hands a call's answers back as they come (``stream``), only those of ``rows``; records
    each call's settings."""

    name = "streaming"

    def __init__(self, rows):
        self.rows, self.settings = rows, []

    def stream(self, prompts, settings):
        self.settings.append(settings)
        for row in self.rows:
            yield row, Generation("x", 1, 1)


class Flight:
    """The loop's collaborators, faked (see the module docstring). ``step(n)`` runs at the n-th wait (from 1)
    before it answers: the test moves ``now`` or counts 429s there."""

    def __init__(self, monkeypatch, step=lambda n: None, now=0.0):
        self.now, self.step = now, step
        self.pools, self.shutdowns, self.pending, self.sent, self.waits, self.told = [], [], [], [], [], []
        flight = self

        class Pool:
            def __init__(self, **options):
                flight.pools.append(options)

            def submit(self, fn, tasks):
                flight.sent.append(tasks[0].index)
                flight.pending.append((Future(), fn, tasks))
                return flight.pending[-1][0]

            def shutdown(self, **options):
                flight.shutdowns.append(options)

        class Limit(InFlightLimit):
            def __init__(self, *args, **options):
                super().__init__(*args, clock=lambda: flight.now, **options)

            def available(self, windows):
                flight.told.append(("available", windows))
                super().available(windows)

            def observe(self, load):
                flight.told.append(("observe", flight.now, load))
                super().observe(load)

            def turned_away(self, held):
                flight.told.append(("turned away", held))
                super().turned_away(held)

        monkeypatch.setattr(loop, "ThreadPoolExecutor", Pool)
        monkeypatch.setattr(loop, "InFlightLimit", Limit)
        monkeypatch.setattr(loop, "wait", self.wait)
        monkeypatch.setattr(loop, "time", SimpleNamespace(perf_counter=lambda: self.now))

    def wait(self, futures, timeout=None, return_when=ALL_COMPLETED):
        self.waits.append((len(futures), timeout, return_when))
        assert len(self.waits) < 50, "the in-flight loop does not end"
        self.step(len(self.waits))
        future, fn, tasks = self.pending.pop(0)
        try:
            future.set_result(fn(tasks))
        except Exception as err:  # noqa: BLE001 (the loop reads it from the future)
            future.set_exception(err)
        return {future}, set(futures) - {future}

    def said(self, what):
        return [told[1:] for told in self.told if told[0] == what]


def test_a_fixed_count_keeps_that_many_out_on_as_many_threads_and_reads_neither_load_nor_429s(monkeypatch):
    backend = Server(loads=[], throttles=0, concurrency=5)  # a poll would meet an empty list
    flight = Flight(monkeypatch, step=lambda n: setattr(backend, "throttles", n))
    engine = Engine(backend, Fan(), concurrency=2)  # the engine's own count: a backend's concurrency is not read
    [result] = engine.rerank([request(3)], progress=False)
    assert result.candidates == request(3).candidates
    assert flight.pools == [{"max_workers": 2, "thread_name_prefix": "rearank-window"}]
    assert flight.sent == [0, 1, 2]
    assert flight.waits == [(2, None, FIRST_COMPLETED), (2, None, FIRST_COMPLETED), (1, None, FIRST_COMPLETED)]
    # the unstarted request, then those in flight and queued
    assert flight.told == [("available", 1), ("available", 1 + 1), ("available", 1), ("available", 0)]
    assert flight.shutdowns == [{"wait": True, "cancel_futures": True}]
    assert engine.counts.limits == []


def test_the_in_flight_limit_is_the_engines_setting_given_by_the_run_never_read_from_the_backend():
    assert Engine(Server(concurrency=3), Fan()).concurrency == AUTO  # an openai client's pool size stays its own
    given, default = RunConfig(backend="openai", model="m", backend_options={"concurrency": 3}), RunConfig("openai", "m")
    assert (given.engine(Server()).concurrency, default.engine(Server()).concurrency) == (3, AUTO)


def test_auto_polls_the_load_every_poll_s_from_the_start_and_counts_each_new_limit(monkeypatch):
    idle, busy = ServerLoad(0, 0), ServerLoad(1, 0)
    flight = Flight(monkeypatch, step=lambda n: setattr(flight, "now", flight.now + 0.5))
    engine = Engine(Server(loads=[idle, busy, None], auto_start=1), Fan())
    [result] = engine.rerank([request(4)], progress=False)
    assert result.candidates == request(4).candidates
    assert flight.pools == [{"max_workers": 256, "thread_name_prefix": "rearank-window"}]
    # polled at 0 (one window ready: stays at 1), at 1.0 (two ready: 2), at 2.0 (none: polls stop)
    assert flight.told == [("available", 1), ("observe", 0.0, idle), ("available", 3), ("available", 2),
                           ("observe", 1.0, busy), ("available", 1), ("available", 0), ("observe", 2.0, None)]
    assert [w[:2] for w in flight.waits] == [(1, 1.0), (1, 1.0), (2, 1.0), (1, 1.0)]
    assert engine.counts.limits == [1, 2]


def test_reranks_bar_counts_queries_and_shows_windows_tokens_a_second_and_autos_limit(monkeypatch):
    BARS.clear()
    monkeypatch.setattr(loop, "tqdm", Bar)
    flight = Flight(monkeypatch, step=lambda n: setattr(flight, "now", flight.now + 0.5), now=10.0)
    Engine(Server(loads=[ServerLoad(0, 0), ServerLoad(1, 0), None], auto_start=1), Fan()).rerank([request(4)])
    [bar] = BARS
    assert bar.kwargs == {"total": 1, "unit": "query", "disable": False, "desc": "rerank fan", "dynamic_ncols": True}
    assert bar.updates == [1]
    # a window answered every 0.5 s from 10.0, 1 token each; the limit rises to 2 after the third answer
    assert bar.postfixes == [{"windows": n, "tok_s": "2.0", "in_flight": limit, "refresh": False}
                             for n, limit in ((1, 1), (2, 1), (3, 1), (4, 2))]


def test_a_server_without_load_is_polled_once_and_then_waited_on_without_a_timeout(monkeypatch):
    flight = Flight(monkeypatch, step=lambda n: setattr(flight, "now", flight.now + 1.0))
    engine = Engine(Server(loads=[None], auto_start=1), Fan())  # a second poll would meet an empty list
    engine.rerank([request(3)], progress=False)
    assert flight.said("observe") == [(0.0, None)]
    assert {w[1] for w in flight.waits} == {None}


def test_429s_as_they_come_cap_at_those_held_and_a_backends_earlier_429s_are_not_news(monkeypatch):
    backend = Server(throttles=5)  # counted before this run
    held_at_429 = {1: (6, None), 3: (8, 3), 4: (9, 9)}  # wait -> (429s so far, requests the server held)

    def step(n):
        if n in held_at_429:
            backend.throttles, backend.held_at_429 = held_at_429[n]

    flight = Flight(monkeypatch, step=step)
    engine = Engine(backend, Fan())
    engine.rerank([request(10)], progress=False)
    # 8 out, 1 turned away: 7 held; 7 out, 2 turned away, the server held 3; 6 out, 1 away: 5, under the cap of 3
    assert flight.said("turned away") == [(7,), (3,), (5,)]
    assert engine.counts.limits == [8, 7, 3]
    assert {w[1] for w in flight.waits} == {THROTTLE_CHECK_S}
    assert [w[0] for w in flight.waits] == [8, 7, 7, 6, 5, 4, 3, 3, 2, 1]


def test_an_interrupt_shuts_the_pool_without_waiting(monkeypatch):
    flight = Flight(monkeypatch)

    def interrupt(result):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Engine(Server(), Fan(), concurrency=1).rerank([request(1)], on_result=interrupt, progress=False)
    assert flight.shutdowns == [{"wait": False, "cancel_futures": True}]


def test_a_journaled_window_is_answered_without_being_sent(monkeypatch, tmp_path):
    flight = Flight(monkeypatch)
    journal = Journal(tmp_path / "j.jsonl", {})
    journal.add("q1", 1, Generation("d1", 1, 1))
    [result] = Engine(Server(), Fan(), concurrency=3, journal=journal).rerank([request(3)], progress=False)
    assert result.candidates == request(3).candidates
    assert flight.sent == [0, 2]


def test_a_stream_waits_stream_poll_s_counts_no_unstarted_requests_and_reads_on_past_none(monkeypatch):
    flight = Flight(monkeypatch)
    results = []
    later = Request(Query("q2", "?"), request(1).candidates)
    # None: no request waiting while q1 is in flight
    Engine(Server(), Fan(), concurrency=2).serve(iter([request(2), None, later]), results.append)
    assert [(r.query.qid, r.candidates) for r in results] == [("q1", request(2).candidates), ("q2", later.candidates)]
    assert flight.said("available") == [(0,), (1,), (0,), (0,)]
    assert {w[1] for w in flight.waits} == {STREAM_POLL_S}


def prompts(n):
    return [Prompt(({"role": "user", "content": str(i)},), qid=f"q{i}") for i in range(n)]


def test_generate_in_flight_at_the_engines_count_counts_its_prompts_as_unstarted(monkeypatch):
    flight = Flight(monkeypatch)
    out = Engine(Server(), concurrency=1).generate(prompts(2))
    assert [g.text for g in out] == ["0", "1"]
    assert flight.pools == [{"max_workers": 1, "thread_name_prefix": "rearank-window"}]
    assert flight.said("available") == [(2,), (1,), (0,)]
    assert flight.waits == [(1, None, FIRST_COMPLETED)] * 2


def test_the_engines_settings_go_to_the_backend_and_a_call_outside_the_schedule_has_its_own():
    backend, own, call = Server(), SamplingSettings(max_new_tokens=9), SamplingSettings(max_new_tokens=3)
    engine = Engine(backend, settings=own, concurrency=1)
    engine.generate(prompts(1))
    engine.call(prompts(1), call)
    assert backend.settings == [own, call]


def test_a_bare_backend_gets_batches_of_32_with_default_settings_one_call_at_a_time():
    backend = Bare()
    engine = backend.engine = Engine(backend)
    assert [g.text for g in engine.generate(prompts(33))] == ["x"] * 33
    assert backend.seen == [(32, SamplingSettings(), True), (1, SamplingSettings(), True)]


def test_the_method_gets_the_backends_tokenizer_unless_it_has_its_own_and_the_backend_its_format():
    backend = Server(tokenizer="the backend's")
    engine = Engine(backend, Fan())
    assert engine.method.tokenizer == "the backend's" and backend.formats == [engine.method]
    assert Engine(backend, Fan(tokenizer="its own")).method.tokenizer == "its own"
    assert Engine(Server(), Fan(tokenizer="its own")).method.tokenizer == "its own"
    alone = Server()
    Engine(alone)
    assert alone.formats == []


def test_a_stream_gets_the_engines_settings_and_the_first_window_it_left_out_is_named():
    backend, settings = Streaming(rows=[1]), SamplingSettings(max_new_tokens=5)
    requests = [Request(Query(qid, "?"), request(n).candidates) for qid, n in (("a", 1), ("b", 2))]
    # one call of a's window 0 and b's windows 0 and 1; only b's window 0 comes back
    with pytest.raises(RearankError, match=r"^backend 'streaming' returned nothing for 2 windows "
                                           r"\(first: query 'a', window 0\)$"):
        Engine(backend, Fan(), settings).rerank(requests, progress=False)
    assert backend.settings == [settings]


@pytest.mark.parametrize("value", [0, True, 2.0])
def test_a_batch_size_refusal_names_the_setting_and_the_value(value):
    with pytest.raises(RearankError, match=f"^rounds must be at least 1, got {re.escape(repr(value))}$"):
        check_batch_size(value, "rounds")
