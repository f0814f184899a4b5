"""`rearank rerank --engine ray` on a local Ray cluster (2 CPUs): the same files as the local driver.

The oracle goes through a Ray Data ``map_batches`` actor pool; the vLLM path is built with the real
Ray Data LLM processor (vLLM itself is GPU-only here, so it is configured and fed rows, not run).
"""

import copy
import json

import pytest
import ray  # a dependency (rearank[train]): missing, the test must fail

from rearank.backends import ray as ray_backend
from rearank.backends.base import ERROR, BackendBase, Generation, Prompt, SamplingSettings
from rearank.backends.ray import vllm_generation, vllm_processor
from rearank.backends.registry import make_backend
from rearank.cli import main


@pytest.fixture(scope="module")
def local_ray():
    # a cluster of its own: without address="local", ray.init joins one another run started on this machine and
    # refuses num_cpus there
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture
def dl19_env(dl19, monkeypatch):
    monkeypatch.setenv("REARANK_DATA", str(dl19.parents[1]))
    return dl19


def traces_without_latency(path):
    return [{**json.loads(line), "latency_s": 0} for line in path.read_text().splitlines()]


def rerank_both(tmp_path, args, ray_args=()):
    """Run the local driver and the Ray engine (plus ``ray_args``) on ``args``; return both output paths."""
    local, distributed = tmp_path / "local.trec", tmp_path / "ray.trec"
    assert main(["rerank", *args, "--no-progress", "--output", str(local)]) == 0
    assert main(["rerank", *args, *ray_args, "--no-progress", "--engine", "ray", "--output", str(distributed)]) == 0
    return local, distributed


def assert_same_outputs(local, distributed):
    assert distributed.read_text() == local.read_text()
    traces = distributed.with_name(distributed.name + ".traces.jsonl")
    assert traces_without_latency(traces) == traces_without_latency(local.with_name(local.name + ".traces.jsonl"))
    ours, theirs = (json.loads(p.with_name(p.name + ".stats.json").read_text()) for p in (distributed, local))
    for key in ("queries", "calls", "prompt_tokens", "completion_tokens", "status_counts", "ndcg_cut_10"):
        assert ours[key] == theirs[key], key
    assert not distributed.with_name(distributed.name + ".rounds.jsonl").exists()  # complete: journal removed


def test_listwise_oracle_run_equals_the_local_driver(local_ray, dl19_env, tmp_path):
    # top-k 30, window 20, step 10: windows (10, 30) then (0, 20) -> two rounds of three queries
    local, distributed = rerank_both(tmp_path, ["--dataset", "dl19", "--backend", "oracle",
                                                "--max-queries", "3", "--top-k", "30"])
    assert_same_outputs(local, distributed)
    assert len(traces_without_latency(distributed.with_name("ray.trec.traces.jsonl"))) == 3 * 2


def test_tdpart_oracle_run_equals_the_local_driver(local_ray, dl19_env, tmp_path):
    # top-down partitioning: a round's windows (the partitions) go to Ray in one Dataset with other queries'
    local, distributed = rerank_both(tmp_path, ["--dataset", "dl19", "--backend", "oracle", "--max-queries", "3",
                                                "--top-k", "50", "--strategy", "tdpart"])
    assert_same_outputs(local, distributed)
    rounds = {t["round"] for t in traces_without_latency(distributed.with_name("ray.trec.traces.jsonl"))}
    assert {0, 1} <= rounds


@pytest.mark.slow
def test_groupwise_oracle_run_equals_the_local_driver(local_ray, dl19_env, tmp_path):
    local, distributed = rerank_both(tmp_path, ["--dataset", "dl19", "--backend", "oracle", "--method",
                                                "groupwise", "--max-queries", "2", "--top-k", "40",
                                                "--group-size", "10"], ["-O", "actors=2"])
    assert_same_outputs(local, distributed)


@pytest.mark.slow
def test_whole_dl19_with_the_oracle_equals_the_local_driver(local_ray, dl19_env, tmp_path):
    local, distributed = rerank_both(tmp_path, ["--dataset", "dl19", "--backend", "oracle"],
                                     ["-O", "batch_size=16"])
    assert_same_outputs(local, distributed)
    stats = json.loads((tmp_path / "ray.trec.stats.json").read_text())
    assert stats["queries"] == 43 and stats["calls"] == 43 * 9  # 100 candidates: 9 windows, 9 rounds
    assert stats["ndcg_cut_10"]["after"] == pytest.approx(0.8922, abs=5e-5)  # the README's oracle ceiling


@pytest.mark.slow
def test_embedded_model_through_map_batches_equals_the_local_driver(local_ray, dl19_env, tmp_path):
    # greedy, batch 1 on CPU: the generations depend on the prompt only, so both engines agree
    local, distributed = rerank_both(tmp_path, ["--dataset", "dl19", "--max-queries", "1", "--top-k", "6",
                                                "--window", "4", "--step", "2", "--max-new-tokens", "24",
                                                "--passage-budget", "40"])
    assert_same_outputs(local, distributed)


@pytest.mark.slow
def test_vllm_rows_go_through_the_real_ray_data_llm_processor(local_ray, tmp_path):
    options = {"actors": 2, "tensor_parallel_size": 1, "max_model_len": 8192, "accelerator_type": "H100"}
    settings = SamplingSettings(max_new_tokens=512, temperature=0.0)
    processor = vllm_processor(str(tmp_path), options, settings, batch_size=16)
    config = processor.config
    assert (config.concurrency, config.batch_size, config.accelerator_type) == (2, 16, "H100")
    assert config.should_continue_on_error is True
    assert config.engine_kwargs["max_model_len"] == 8192 and config.engine_kwargs["enable_prefix_caching"] is True
    assert "actors" not in config.engine_kwargs and "concurrency" not in config.engine_kwargs and "accelerator_type" not in config.engine_kwargs
    assert any("vLLMEngine" in name for name in processor.stages)
    row = {"row": 3, "qid": "q", "docids": ["a", "b"], "messages": [{"role": "user", "content": "x"}]}
    prepared = processor.preprocess(row)
    data = prepared[processor.DATA_COLUMN]
    assert data["messages"] == row["messages"] and data["row"] == 3
    assert data["sampling_params"] == {"max_tokens": 512, "temperature": 0.0, "top_p": 1.0}  # greedy: no seed
    engine_out = {"generated_text": "<answer>[2] > [1]</answer>", "num_input_tokens": 40,
                  "num_generated_tokens": 512, "time_taken_llm": 1.5, "__inference_error__": ""}
    done = processor.postprocess({processor.DATA_COLUMN: {**data, **engine_out}})
    generation = vllm_generation(done, settings.max_new_tokens)
    assert done["row"] == 3 and generation.text == "<answer>[2] > [1]</answer>"
    assert (generation.prompt_tokens, generation.completion_tokens, generation.latency_s) == (40, 512, 1.5)
    assert generation.finish_reason == "length"  # used the whole 512-token budget
    failed = vllm_generation({"row": 3, "__inference_error__": "EngineDeadError"}, 512)
    assert failed.finish_reason == ERROR


class InProcess(BackendBase):
    """Stands in for RayBackend (same signature) to test the CLI's journal wiring without a cluster.

    Generates with the real backend in this process; the ``stop_at``-th round raises KeyboardInterrupt.
    """

    name, calls_made, stop_at = "ray", 0, None

    def __init__(self, backend, model, options, settings, *, batch_size=32, progress=True):
        self.backend = make_backend(backend, model, **options)
        self.settings = settings

    def answer_format(self, method):
        bound = copy.copy(self)
        bound.backend = self.backend.answer_format(method)
        return bound

    def stream(self, prompts, settings):
        InProcess.calls_made += 1
        if InProcess.calls_made == InProcess.stop_at:
            raise KeyboardInterrupt
        yield from enumerate(self.backend.generate(prompts, self.settings))


def test_an_interrupted_ray_run_resumes_by_round(dl19_env, tmp_path, monkeypatch):
    args = ["rerank", "--dataset", "dl19", "--backend", "oracle", "--max-queries", "3", "--no-progress"]
    local = tmp_path / "local.trec"
    assert main([*args, "--output", str(local)]) == 0
    monkeypatch.setattr(ray_backend, "RayBackend", InProcess)
    out, journal = tmp_path / "ray.trec", tmp_path / "ray.trec.rounds.jsonl"
    InProcess.calls_made, InProcess.stop_at = 0, 5  # rounds 1-4 of 9 done, then a kill
    assert main([*args, "--engine", "ray", "--output", str(out)]) == 130
    assert out.read_text() == "" and len(journal.read_text().splitlines()) == 1 + 4 * 3  # header + 4 rounds x 3
    assert main([*args, "--engine", "ray", "--window", "10", "--output", str(out), "--resume"]) == 2  # other settings
    InProcess.calls_made, InProcess.stop_at = 0, None
    assert main([*args, "--engine", "ray", "--output", str(out), "--resume"]) == 0
    assert InProcess.calls_made == 9 - 4  # only the rounds not in the journal
    assert out.read_text() == local.read_text() and not journal.exists()
    assert traces_without_latency(tmp_path / "ray.trec.traces.jsonl") == traces_without_latency(
        tmp_path / "local.trec.traces.jsonl")


def test_the_answer_grammar_and_think_outcome_cross_the_actor_boundary(monkeypatch):
    # -O constrain / max_think_tokens act on Prompt.answer: a Ray row must carry it to the actor's backend,
    # and the actor must hand back the think outcome the traces report
    import pyarrow as pa

    from rearank.grammar import id_list_answer

    seen = []

    class Recording:
        def answer_format(self, method):
            return self

        def generate(self, prompts, settings):
            seen.extend(prompts)
            return [Generation(text="[1]", prompt_tokens=3, completion_tokens=1, finish_reason="stop",
                               latency_s=0.0, think_tokens=7, think_budget_hit=True) for _ in prompts]

    monkeypatch.setattr(ray_backend, "make_backend", lambda *a, **k: Recording())
    grammar = id_list_answer(3, reasoning=True, tags=True)
    prompts = [(0, Prompt(messages=({"role": "user", "content": "x"},), qid="q", docids=("a", "b", "c"),
                          answer=grammar)),
               (1, Prompt(messages=({"role": "user", "content": "y"},), qid="q", docids=("a",)))]
    actor = ray_backend.BackendActor("hf", None, {}, SamplingSettings())
    out = actor(pa.Table.from_pylist(ray_backend.prompt_rows(prompts)))
    assert [p.answer for p in seen] == [grammar, None]
    assert out["think_tokens"] == [7, 7] and out["think_budget_hit"] == [True, True]
