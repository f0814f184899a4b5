"""Rounds on the one engine (``--engine ray`` without Ray): a batch of every ready window per call, a backend
that streams its answers in any order, the journal that resumes window by window."""

import json
from dataclasses import asdict

import pytest

from rearank.backends.base import BackendBase
from rearank.backends.oracle import OracleBackend
from rearank.backends.ray import ROUND
from rearank.engine import Engine
from rearank.engine.journal import Journal
from rearank.errors import FormatError, RearankError
from tests.engines import groupwise, listwise
from tests.unit.test_engine_listwise import SortingBackend, request, shuffled_worths

CONFIG = {"window": 4, "step": 2}


class Rounds(BackendBase):
    """A streaming backend over another: yields each call's answers in reverse order, counts rows and calls.

    ``stop_after`` rows in all, it raises KeyboardInterrupt (a kill mid-round).
    """

    name = "rounds"

    def __init__(self, backend, stop_after=None):
        self.backend, self.stop_after = backend, stop_after
        self.calls = self.rows = 0

    def stream(self, prompts, settings):
        self.calls += 1
        generations = self.backend.generate(prompts, settings)
        for row, generation in reversed(list(enumerate(generations))):
            if self.stop_after is not None and self.rows == self.stop_after:
                raise KeyboardInterrupt
            self.rows += 1
            yield row, generation


def requests():
    # 10, 7, 4 and 1 candidates: windows (4, 2) give 4, 3, 1 and 0 windows per query.
    return [request(f"q{i}", shuffled_worths(n, i)) for i, n in enumerate((10, 7, 4, 1))]


def local_engine():
    return listwise(SortingBackend(), window=4, step=2, passage_budget=None)


def rounds_engine(backend, journal=None, ranker=local_engine):
    return Engine(backend, ranker().method, batch_size=ROUND, journal=journal)


def same(a, b):
    strip = [(r.query, r.candidates, [t.__class__(**{**t.__dict__, "latency_s": 0}) for t in r.traces]) for r in a]
    return strip == [(r.query, r.candidates, [t.__class__(**{**t.__dict__, "latency_s": 0}) for t in r.traces])
                     for r in b]


def test_listwise_rounds_equal_the_local_driver_with_one_call_per_round():
    local = local_engine().rerank(requests(), progress=False)
    backend = Rounds(SortingBackend())
    finished = []
    results = rounds_engine(backend).rerank(requests(), on_result=finished.append, progress=False)
    assert same(results, local)
    # schedule(10, 4, 2): 4 windows; (7): 3; (4): 1; (1): none -> 4 rounds and 4 + 3 + 1 = 8 rows
    assert backend.calls == 4 and backend.rows == 8
    assert [r.query.qid for r in finished] == ["q3", "q2", "q1", "q0"]  # in the order they finish


def test_groupwise_runs_every_group_in_one_round():
    qrels = {r.query.qid: {c.docid: i % 3 for i, c in enumerate(r.candidates)} for r in requests()}

    def ranker():
        return groupwise(OracleBackend(qrels), group_size=3, passage_budget=None)

    local = ranker().rerank(requests(), progress=False)
    backend = Rounds(ranker().backend)
    results = rounds_engine(backend, ranker=ranker).rerank(requests(), progress=False)
    assert same(results, local)
    # partition(10, 3) = 4 groups, (7) = 3, (4) = 2, (1) = none: 9 rows, one call
    assert backend.calls == 1 and backend.rows == 9


def test_an_interrupted_run_resumes_from_its_journal(tmp_path):
    path = tmp_path / "run.rounds.jsonl"
    local = local_engine().rerank(requests(), progress=False)
    killed = Rounds(SortingBackend(), stop_after=5)  # round 1 (3 rows) and 2 of the 3 rows of round 2
    with pytest.raises(KeyboardInterrupt):
        rounds_engine(killed, Journal(path, CONFIG)).rerank(requests(), progress=False)
    assert len(path.read_text().splitlines()) == 1 + 5  # header + five generations
    again = Rounds(SortingBackend())
    results = rounds_engine(again, Journal(path, CONFIG, resume=True)).rerank(requests(), progress=False)
    assert same(results, local)
    assert again.rows == 8 - 5  # only the windows not in the journal
    assert not path.exists()  # complete: the journal is removed


@pytest.mark.parametrize("schedule", ["batches", "in flight"])
def test_any_engine_resumes_from_a_journal_of_another_schedule(tmp_path, schedule):
    # the journal belongs to the one loop: a run killed on rounds resumes in batches of 2 or with windows in flight
    path = tmp_path / "run.rounds.jsonl"
    local = local_engine().rerank(requests(), progress=False)
    with pytest.raises(KeyboardInterrupt):
        rounds_engine(Rounds(SortingBackend(), stop_after=4), Journal(path, CONFIG)).rerank(requests(), progress=False)
    sent = []

    class Counting(SortingBackend):
        def generate(self, prompts, settings):
            sent.extend((p.qid, tuple(p.docids)) for p in prompts)
            return super().generate(prompts, settings)

    engine = Engine(Counting(), local_engine().method, batch_size=2, in_flight=schedule == "in flight",
                    concurrency=3, journal=Journal(path, CONFIG, resume=True))
    assert same(engine.rerank(requests(), progress=False), local)
    assert len(sent) == 8 - 4 and not path.exists()


def test_without_resume_the_journal_starts_afresh(tmp_path):
    path = tmp_path / "j.jsonl"
    Journal(path, CONFIG).add("q", 0, SortingBackend()._one(_prompt()))
    assert Journal(path, CONFIG, resume=True).entries
    assert Journal(path, CONFIG).entries == {} and len(path.read_text().splitlines()) == 1


def _prompt():
    return local_engine().method.start(requests()[0])[1][0].prompt


def test_journal_refuses_other_settings_and_names_bad_lines(tmp_path):
    path = tmp_path / "j.jsonl"
    Journal(path, CONFIG).close()
    with pytest.raises(RearankError, match="other settings \\(step\\)"):
        Journal(path, {"window": 4, "step": 3}, resume=True)
    header = path.read_text()
    good = json.dumps({"qid": "q", "index": 1, **asdict(SortingBackend()._one(_prompt()))}) + "\n"
    path.write_text(header + '{"qid": "q", "index": 0, "text": "x"}\n' + good)  # a bad line before a good one
    with pytest.raises(FormatError, match=r"j.jsonl:2: not a round journal record"):
        Journal(path, CONFIG, resume=True)
    path.write_text("not json\n" + good)
    with pytest.raises(FormatError, match=r"j.jsonl:1: not a round journal record \(Expecting value"):
        Journal(path, CONFIG, resume=True)
    path.write_text(good)
    with pytest.raises(FormatError, match=r"j.jsonl:1: not a rearank round journal"):
        Journal(path, CONFIG, resume=True)


def test_a_torn_last_line_is_dropped_and_the_rest_kept(tmp_path, caplog):
    path = tmp_path / "j.jsonl"
    journal = Journal(path, CONFIG)
    journal.add("q", 0, SortingBackend()._one(_prompt()))
    journal.close()
    path.write_text(path.read_text() + '{"qid": "q", "index": 1, "te')
    resumed = Journal(path, CONFIG, resume=True)
    assert list(resumed.entries) == [("q", 0)]
    assert "dropping an unfinished last round journal record" in caplog.text
    assert json.loads(path.read_text().splitlines()[-1])["index"] == 0


def test_a_backend_that_drops_rows_is_an_error():
    class Lossy(Rounds):
        def stream(self, prompts, settings):
            return iter([next(iter(super().stream(prompts, settings)))])

    with pytest.raises(RearankError, match="returned nothing for 2 windows"):
        rounds_engine(Lossy(SortingBackend())).rerank(requests(), progress=False)
