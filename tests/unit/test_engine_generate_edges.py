"""The engine's generate: its progress bar counts prompts, each prompt is window 0 of its own journal key, and a
stream's request without windows is finished at once."""

from __future__ import annotations

from rearank.backends.base import BackendBase, Generation, Prompt
from rearank.engine import Engine, loop
from rearank.engine.journal import Journal
from rearank.types import Query, Request
from tests.engines import listwise
from tests.unit.test_engine_listwise import SortingBackend


class Echo(BackendBase):
    name = "echo"

    def generate(self, prompts, settings):
        return [Generation(p.qid, 1, 2) for p in prompts]


BARS: list[Bar] = []


class Bar:
    """Stands in for tqdm, recording each bar in ``BARS`` (a real bar's process-wide lock, inherited by mutmut's
    forked workers, deadlocks them)."""

    def __init__(self, **kwargs):
        self.kwargs, self.updates, self.postfixes, self.closed = kwargs, [], [], False
        BARS.append(self)

    def update(self, n=1):
        self.updates.append(n)

    def set_postfix(self, **kwargs):
        self.postfixes.append(kwargs)

    def close(self):
        self.closed = True


PROMPTS = [Prompt(({"role": "user", "content": "x"},), qid=f"q{i}") for i in range(3)]


def test_the_progress_bar_counts_prompts(monkeypatch):
    BARS.clear()
    monkeypatch.setattr(loop, "tqdm", Bar)
    assert [g.text for g in Engine(Echo(), batch_size=2).generate(PROMPTS)] == ["q0", "q1", "q2"]
    Engine(Echo()).generate(PROMPTS, progress=True, desc="read")
    (quiet, shown) = BARS
    assert quiet.kwargs == {"total": 3, "unit": "prompt", "disable": True, "desc": "generate", "dynamic_ncols": True}
    assert shown.kwargs["disable"] is False and shown.kwargs["desc"] == "read"
    assert quiet.updates == shown.updates == [1, 1, 1]


def test_each_generated_prompt_is_journaled_as_window_0(tmp_path):
    journal = Journal(tmp_path / "j.jsonl", {})
    Engine(Echo(), journal=journal).generate(PROMPTS)
    assert sorted(journal.entries) == [("q0", 0), ("q1", 0), ("q2", 0)]


def test_a_streamed_request_without_windows_is_finished_at_once():
    engine = listwise(SortingBackend(), window=4, step=2, passage_budget=None)
    results = []
    engine.serve(iter([Request(Query("q", "t"), ())]), results.append)
    assert [(r.query.qid, r.candidates) for r in results] == [("q", ())]
