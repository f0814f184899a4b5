"""The Ray backend's own logic with a fake Ray (no cluster): how it starts Ray, splits ``-O`` options between Ray,
Ray Data LLM and the backend, builds the Dataset rows, rebuilds the prompts in an actor, turns rows back into
generations in the prompts' order, and its refusals, word for word.

The fakes stand in for the few ``ray``, ``ray.data``, ``ray.data.llm`` and ``transformers`` calls the module makes;
the Dataset runs each actor in this process over pyarrow batches and yields the rows last batch first (Ray's order
is not the input's). tests/integration/test_ray_engine.py runs a real local Ray.
"""

from __future__ import annotations

import json
import logging
import sys
import types
from typing import ClassVar

import pyarrow as pa
import pytest

from rearank.backends import ray as ray_backend
from rearank.backends.base import ERROR, RAY_ACTORS, RAY_DATA_LLM, Generation, Prompt, SamplingSettings
from rearank.errors import RearankError
from rearank.grammar import AnswerGrammar, id_list_answer
from rearank.plugins import Registry

SETTINGS = SamplingSettings(max_new_tokens=8, temperature=0.0)


class Pool:
    """``ray.data.ActorPoolStrategy``: equal to another made with the same arguments."""

    def __init__(self, **kwargs):
        self.kwargs = kwargs

    def __eq__(self, other):
        return isinstance(other, Pool) and other.kwargs == self.kwargs

    def __repr__(self):
        return f"Pool({self.kwargs})"


class Config:
    """``vLLMEngineProcessorConfig``: its fields, and a refusal of a bad batch size (TypeError) or concurrency."""

    model_fields = dict.fromkeys(["model_source", "engine_kwargs", "batch_size", "concurrency", "accelerator_type",
                                  "should_continue_on_error"])

    def __init__(self, **kwargs):
        if not isinstance(kwargs["batch_size"], int):
            raise TypeError("batch_size must be an integer")
        if kwargs.get("concurrency", 1) < 1:
            raise ValueError("concurrency must be at least 1")
        self.kwargs = kwargs


class FakeRay:
    """The ``ray`` modules: ``init`` calls, the Data context, the ``map_batches`` calls and the engine of
    ``build_processor`` (``engine(row)``: vLLM's output columns for a row, or None to lose the row)."""

    def __init__(self):
        self.initialized = False
        self.inits: list[dict] = []
        self.context = types.SimpleNamespace(enable_progress_bars=None)
        self.mapped: list[tuple] = []
        self.engine = lambda row: {"generated_text": f"out {row['row']}", "num_generated_tokens": 3}
        fake = self

        class Dataset:
            def __init__(self, rows):
                self.rows = rows

            def map_batches(self, fn, *, fn_constructor_args, batch_format, **stage):
                fake.mapped.append((fn, fn_constructor_args, batch_format, stage))
                assert batch_format == "pyarrow"
                actor, size, out = fn(*fn_constructor_args), stage["batch_size"], []
                for start in range(0, len(self.rows), size):
                    out.append(pa.table(actor(pa.Table.from_pylist(self.rows[start:start + size]))).to_pylist())
                return Dataset([row for batch in reversed(out) for row in batch])

            def iter_rows(self):
                return iter(self.rows)

        class Processor:
            def __init__(self, config, *, preprocess, postprocess):
                self.config, self.preprocess, self.postprocess = config, preprocess, postprocess

            def __call__(self, dataset):
                done = []
                for row in dataset.rows:
                    ready = {**row, **self.preprocess(row)}
                    output = fake.engine(ready)
                    if output is not None:
                        done.append(self.postprocess({**ready, **output}))
                return Dataset(done[::-1])

        self.module = types.ModuleType("ray")
        self.module.is_initialized = lambda: self.initialized
        self.module.init = lambda **kwargs: self.inits.append(kwargs)
        self.data = types.ModuleType("ray.data")
        self.data.ActorPoolStrategy = Pool
        self.data.DataContext = types.SimpleNamespace(get_current=lambda: self.context)
        self.data.from_items = Dataset
        self.llm = types.ModuleType("ray.data.llm")
        self.llm.build_processor = Processor
        self.llm.vLLMEngineProcessorConfig = Config
        self.module.data, self.data.llm = self.data, self.llm


class Tokenizers:
    """``transformers.AutoTokenizer``: ``from_pretrained``'s calls; a path ending in ``broken`` fails."""

    loaded: ClassVar[list[tuple]] = []

    @classmethod
    def from_pretrained(cls, path, **kwargs):
        cls.loaded.append((path, kwargs))
        if path.endswith("broken"):
            raise OSError("no tokenizer.json")
        return f"tokenizer of {path}"


class Echo:
    """The actors' backend: answers each prompt with its qid and docids; ``made`` logs each one built, ``formats``
    the methods it was bound to."""

    made: ClassVar[list[Echo]] = []

    def __init__(self, name, model, options):
        self.name, self.model, self.options, self.formats = name, model, options, []
        self.prompts, self.settings = [], None
        Echo.made.append(self)

    def answer_format(self, method):
        self.formats.append(method)
        return self

    def generate(self, prompts, settings):
        self.prompts.extend(prompts)
        self.settings = settings
        return [Generation(text=f"{p.qid}:{','.join(p.docids)}", prompt_tokens=10 + len(p.docids),
                           completion_tokens=len(p.docids), finish_reason="length" if p.pair else "stop",
                           latency_s=0.25, think_tokens=len(p.docids) if p.answer else None,
                           think_budget_hit=p.answer is not None)
                for p in prompts]


@pytest.fixture
def fake_ray(monkeypatch):
    fake = FakeRay()
    for name, module in (("ray", fake.module), ("ray.data", fake.data), ("ray.data.llm", fake.llm)):
        monkeypatch.setitem(sys.modules, name, module)
    transformers = types.ModuleType("transformers")
    transformers.AutoTokenizer = Tokenizers
    monkeypatch.setitem(sys.modules, "transformers", transformers)
    monkeypatch.setattr(Tokenizers, "loaded", [])
    monkeypatch.setattr(Echo, "made", [])
    monkeypatch.setattr(ray_backend, "make_backend", lambda name, model, **options: Echo(name, model, options))
    monkeypatch.setattr(ray_backend, "BACKENDS", Registry("rearank.test-ray-backends", "backend", {
        "llm": lambda: type("LLM", (), {"MODEL_TOKENIZER": True, "RAY": RAY_DATA_LLM}),
        "pooled": lambda: type("Pooled", (), {"MODEL_TOKENIZER": False, "RAY": RAY_ACTORS}),
        "tokenized": lambda: type("Tokenized", (), {"MODEL_TOKENIZER": True, "RAY": RAY_ACTORS}),
        "plugin": lambda: type("Plugin", (), {"RAY": RAY_ACTORS}),
    }))
    logger = logging.getLogger("ray.data")
    level = logger.level
    logger.setLevel(logging.INFO)
    yield fake
    logger.setLevel(level)


def prompt(qid, docids, **kwargs):
    return Prompt(messages=({"role": "system", "content": "rank"}, {"role": "user", "content": qid}), qid=qid,
                  docids=tuple(docids), **kwargs)


def test_ray_starts_once_quietly(fake_ray):
    assert ray_backend._ray() is fake_ray.module
    assert fake_ray.inits == [{"logging_level": "WARNING", "log_to_driver": False}]
    assert logging.getLogger("ray.data").level == logging.WARNING
    fake_ray.initialized = True
    ray_backend._ray()
    assert len(fake_ray.inits) == 1  # a running Ray (RAY_ADDRESS, an earlier call) is kept


def test_without_ray_the_engine_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(RearankError) as err:
        ray_backend._ray()
    assert str(err.value) == ("--engine ray needs Ray Data (import of ray halted; None in sys.modules); install it "
                              "with `pip install 'ray[data]'`")
    assert err.value.__suppress_context__


@pytest.mark.parametrize(("actors", "pool"), [
    (1, Pool(size=1)), (3, Pool(size=3)), ([2, 4], Pool(min_size=2, max_size=4)),
    ((1, "3"), Pool(min_size=1, max_size=3))])
def test_actor_pools_are_fixed_or_autoscaling(fake_ray, actors, pool):
    assert ray_backend.actor_pool(actors) == pool


@pytest.mark.parametrize("actors", [0, -2, True, 2.0, "2", [1, 2, 3], [4]])
def test_other_actor_pools_are_refused(fake_ray, actors):
    with pytest.raises(RearankError) as err:
        ray_backend.actor_pool(actors)
    assert str(err.value) == f"-O actors must be a number of actors N >= 1 or [MIN, MAX], got {actors!r}"


def test_a_rounds_rows_carry_what_the_actor_needs():
    grammar = id_list_answer(2, reasoning=True, tags=True)
    items = [(4, Prompt(messages=({"role": "user", "content": 7},), qid="q1", docids=("a", "b"), answer=grammar)),
             (9, Prompt(messages=(), qid="q2", docids=("c",), pair=("query", "title", "text")))]
    first, second = ray_backend.prompt_rows(items)
    assert AnswerGrammar.from_dict(json.loads(first.pop("answer"))) == grammar
    assert first == {"row": 4, "qid": "q1", "docids": ["a", "b"], "messages": [{"role": "user", "content": "7"}],
                     "pair": []}
    assert second == {"row": 9, "qid": "q2", "docids": ["c"], "messages": [], "answer": "",
                      "pair": ["query", "title", "text"]}


def test_sampling_params_seed_only_a_sampled_run():
    assert ray_backend.sampling_params(SamplingSettings(max_new_tokens=64, temperature=0.0, top_p=0.9, seed=5)) == {
        "max_tokens": 64, "temperature": 0.0, "top_p": 0.9}
    assert ray_backend.sampling_params(SamplingSettings(max_new_tokens=64, temperature=0.5, top_p=0.9, seed=5)) == {
        "max_tokens": 64, "temperature": 0.5, "top_p": 0.9, "seed": 5}


def test_a_vllm_row_becomes_a_generation():
    row = {"row": 1, "generated_text": "[2] > [1]", "num_input_tokens": 40, "num_generated_tokens": 7,
           "time_taken_llm": 0.5}
    assert ray_backend.vllm_generation(row, 8) == Generation(text="[2] > [1]", prompt_tokens=40, completion_tokens=7,
                                                             finish_reason="stop", latency_s=0.5)
    assert ray_backend.vllm_generation(row, 7).finish_reason == "length"  # the whole budget used
    assert ray_backend.vllm_generation({**row, "time_taken_llm": -0.5}, 8).latency_s == 0.0
    assert ray_backend.vllm_generation({"row": 1}, 8) == Generation(text="", prompt_tokens=0, completion_tokens=0,
                                                                    finish_reason="stop", latency_s=0.0)
    assert ray_backend.vllm_generation({**row, "__inference_error__": "EngineDeadError"}, 8) == Generation(
        text="", prompt_tokens=0, completion_tokens=0, finish_reason=ERROR, error="EngineDeadError")


def test_the_processor_splits_options_between_ray_and_the_engine(fake_ray, tmp_path):
    options = {"actors": 2, "accelerator_type": "H100", "max_model_len": 4096, "model_source": "x",
               "engine_kwargs": {"seed": 1}}  # the two fields it sets itself go to the engine like any other
    processor = ray_backend.vllm_processor(str(tmp_path), options, SamplingSettings(max_new_tokens=64), 16)
    assert processor.config.kwargs == {
        "model_source": str(tmp_path), "concurrency": 2, "accelerator_type": "H100", "batch_size": 16,
        "should_continue_on_error": True,
        "engine_kwargs": {"max_model_len": 4096, "model_source": "x", "engine_kwargs": {"seed": 1},
                          "enable_prefix_caching": True}}
    assert fake_ray.inits != []
    assert processor.preprocess({"row": 0}) == {"sampling_params": {"max_tokens": 64, "temperature": 0.0,
                                                                    "top_p": 1.0}}
    assert processor.postprocess({"row": 3, "messages": [], "generated_text": "t", "num_input_tokens": 4,
                                  "num_generated_tokens": 2, "time_taken_llm": 1.5, "extra": 1}) == {
        "row": 3, "generated_text": "t", "num_input_tokens": 4, "num_generated_tokens": 2, "time_taken_llm": 1.5}


def test_concurrency_stays_the_backends_windows_in_flight_and_actors_size_the_pool(fake_ray, tmp_path):
    backend = ray_backend.RayBackend("pooled", "m", {"concurrency": 3}, SETTINGS, progress=False)
    assert backend._actors == (("pooled", "m", {"concurrency": 3}, SETTINGS), {"batch_size": 32, "compute": Pool(size=1)})
    with pytest.raises(RearankError) as err:
        ray_backend.vllm_processor(str(tmp_path), {"concurrency": 2}, SETTINGS, 16)
    assert str(err.value) == ("-O concurrency is a backend's windows in flight; the vLLM engine replicas of --engine "
                              "ray are -O actors=N")


def test_the_processor_keeps_options_given_and_loads_a_gguf_file(fake_ray, tmp_path):
    (tmp_path / "m.gguf").write_bytes(b"")
    options = {"batch_size": 4, "should_continue_on_error": False, "enable_prefix_caching": False}
    processor = ray_backend.vllm_processor(str(tmp_path / "m.gguf"), options, SETTINGS, 16)
    assert processor.config.kwargs == {"model_source": str(tmp_path / "m.gguf"), "batch_size": 4,
                                       "should_continue_on_error": False,
                                       "engine_kwargs": {"enable_prefix_caching": False}}


@pytest.mark.parametrize(("options", "reason"), [({"actors": 0}, "concurrency must be at least 1"),
                                                 ({"batch_size": "8"}, "batch_size must be an integer")])
def test_bad_ray_data_llm_options_are_refused(fake_ray, tmp_path, options, reason):
    with pytest.raises(RearankError) as err:
        ray_backend.vllm_processor(str(tmp_path), options, SETTINGS, 16)
    assert str(err.value) == f"bad Ray Data LLM options ({reason})"
    assert err.value.__suppress_context__


def test_the_driver_loads_the_models_tokenizer_only_for_a_backend_that_does(fake_ray, tmp_path):
    assert ray_backend.driver_tokenizer("pooled", str(tmp_path), {}) is None
    assert ray_backend.driver_tokenizer("plugin", str(tmp_path), {}) is None  # no MODEL_TOKENIZER: none
    assert Tokenizers.loaded == []
    assert ray_backend.driver_tokenizer("tokenized", str(tmp_path), {}) == f"tokenizer of {tmp_path}"
    (tmp_path / "m.gguf").write_bytes(b"")
    ray_backend.driver_tokenizer("llm", str(tmp_path / "m.gguf"), {"trust_remote_code": 1})
    assert Tokenizers.loaded == [(str(tmp_path), {"gguf_file": None, "trust_remote_code": False}),
                                 (str(tmp_path), {"gguf_file": "m.gguf", "trust_remote_code": True})]


def test_a_tokenizer_that_cannot_load_is_named(fake_ray, tmp_path):
    (tmp_path / "broken").mkdir()
    with pytest.raises(RearankError) as err:
        ray_backend.driver_tokenizer("llm", str(tmp_path / "broken"), {})
    assert str(err.value) == f"cannot load the tokenizer of {str(tmp_path / 'broken')!r}: no tokenizer.json"
    assert isinstance(err.value.__cause__, OSError)


def test_an_actor_rebuilds_each_prompt_and_returns_columns(fake_ray):
    grammar = id_list_answer(2, reasoning=True, tags=True)
    prompts = [prompt("q1", ["a", "b"], answer=grammar), prompt("q2", ["c"], pair=("q", "t", "x"))]
    actor = ray_backend.BackendActor("pooled", "m", {"k": 1}, SETTINGS)
    out = actor(pa.Table.from_pylist(ray_backend.prompt_rows([(5, prompts[0]), (2, prompts[1])])))
    (backend,) = Echo.made
    assert (backend.name, backend.model, backend.options, backend.formats) == ("pooled", "m", {"k": 1}, [])
    assert backend.prompts == prompts and backend.settings == SETTINGS
    assert out == {"row": [5, 2], "text": ["q1:a,b", "q2:c"], "prompt_tokens": [12, 11], "completion_tokens": [2, 1],
                   "finish_reason": ["stop", "length"], "latency_s": [0.25, 0.25], "think_tokens": [2, None],
                   "think_budget_hit": [True, False]}


def test_an_actor_answers_for_the_bound_method_and_checks_the_count(fake_ray):
    actor = ray_backend.BackendActor("pooled", None, {}, SETTINGS, "the method")
    assert actor.backend.formats == ["the method"]
    actor.backend.generate = lambda prompts, settings: []
    with pytest.raises(RearankError) as err:
        actor(pa.Table.from_pylist(ray_backend.prompt_rows([(0, prompt("q", ["a"]))])))
    assert str(err.value) == "backend 'pooled' returned 0 generations for 1 prompts"


def test_an_actor_pool_run_returns_generations_in_the_prompts_order(fake_ray):
    options = {"actors": [1, 2], "num_cpus": 2, "batch_size": 2, "k": 1}
    backend = ray_backend.RayBackend("pooled", "m", options, SETTINGS, progress=False)
    assert options == {"actors": [1, 2], "num_cpus": 2, "batch_size": 2, "k": 1}  # the caller's are kept
    assert (backend.tokenizer, backend.data_llm, fake_ray.context.enable_progress_bars) == (None, False, False)
    bound = backend.answer_format("the method")
    assert (bound.method, backend.method) == ("the method", None)
    prompts = [prompt("q1", ["a", "b"], answer=id_list_answer(2, reasoning=True, tags=True)), prompt("q2", ["c"]),
               prompt("q3", ["d", "e", "f"], pair=("q", "t", "x"))]
    out = bound.generate(prompts, SamplingSettings(max_new_tokens=1))

    assert out == [
        Generation(text="q1:a,b", prompt_tokens=12, completion_tokens=2, latency_s=0.25, think_tokens=2,
                   think_budget_hit=True),
        Generation(text="q2:c", prompt_tokens=11, completion_tokens=1, latency_s=0.25),
        Generation(text="q3:d,e,f", prompt_tokens=13, completion_tokens=3, finish_reason="length", latency_s=0.25)]
    assert [type(g.prompt_tokens) for g in out] == [int] * 3
    (fn, args, batch_format, stage), = fake_ray.mapped
    assert (fn, args, batch_format) == (ray_backend.BackendActor, ("pooled", "m", {"k": 1}, SETTINGS, "the method"),
                                        "pyarrow")
    assert stage == {"num_cpus": 2, "batch_size": 2, "compute": Pool(min_size=1, max_size=2)}
    assert [e.formats for e in Echo.made] == [["the method"]] and Echo.made[0].settings == SETTINGS


def test_an_actor_pool_defaults_to_one_actor_and_batches_of_32(fake_ray):
    backend = ray_backend.RayBackend("plugin", None, {}, SETTINGS)
    assert fake_ray.context.enable_progress_bars is True
    assert list(backend.stream([prompt("q", ["a"])], SETTINGS)) == [
        (0, Generation(text="q:a", prompt_tokens=11, completion_tokens=1, latency_s=0.25))]
    (_, args, _, stage), = fake_ray.mapped
    assert args[-1] is None and stage == {"batch_size": 32, "compute": Pool(size=1)}


def test_a_ray_data_llm_run_uses_the_processor_and_the_backends_budget(fake_ray, tmp_path):
    backend = ray_backend.RayBackend("llm", str(tmp_path), {"actors": 2, "max_model_len": 4096}, SETTINGS,
                                     batch_size=4)
    assert backend.data_llm is True and backend.tokenizer == f"tokenizer of {tmp_path}"
    assert backend.processor.config.kwargs == {
        "model_source": str(tmp_path), "concurrency": 2, "batch_size": 4, "should_continue_on_error": True,
        "engine_kwargs": {"max_model_len": 4096, "enable_prefix_caching": True}}
    assert fake_ray.mapped == []
    fake_ray.engine = lambda row: {"generated_text": f"out {row['qid']}", "num_input_tokens": 9,
                                   "num_generated_tokens": 8 if row["qid"] == "q2" else 3, "time_taken_llm": 0.5}
    out = backend.generate([prompt("q1", ["a"]), prompt("q2", ["b"])], SamplingSettings(max_new_tokens=100))
    assert out == [Generation(text="out q1", prompt_tokens=9, completion_tokens=3, latency_s=0.5),
                   Generation(text="out q2", prompt_tokens=9, completion_tokens=8, finish_reason="length",
                              latency_s=0.5)]  # the budget the stage was built with (8), not the call's


def test_windows_ray_did_not_return_are_counted(fake_ray, tmp_path):
    backend = ray_backend.RayBackend("llm", str(tmp_path), {}, SETTINGS)
    fake_ray.engine = lambda row: None if row["qid"] != "q2" else {"generated_text": "x"}
    with pytest.raises(RearankError) as err:
        backend.generate([prompt("q1", ["a"]), prompt("q2", ["b"]), prompt("q3", ["c"])], SETTINGS)
    assert str(err.value) == "Ray returned 2 of 3 windows empty"
