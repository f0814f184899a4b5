"""A backend that generates across a Ray cluster with Ray Data (``rearank rerank --engine ray``).

:class:`RayBackend` is a batch backend of the one engine (:class:`rearank.engine.Engine`), which binds it to the
method it runs (:meth:`RayBackend.answer_format`: the actors' backends answer in that method's format) and hands it a
*round*: every window the queries have ready (:data:`ROUND`), the next window of each listwise query or all the
groups of each groupwise one. The round becomes a Ray Dataset with one row per window (``row``, ``qid``,
``docids``, ``messages``), mapped through:

- ``vllm``: Ray Data LLM (:func:`ray.data.llm.build_processor` with a
  :class:`ray.data.llm.vLLMEngineProcessorConfig`): vLLM engine replicas over the cluster's GPUs, the
  model's chat template applied by Ray. ``actors`` is the number of engine replicas (the config's
  ``concurrency``); options whose names are other fields of the config (``batch_size``, ``accelerator_type``,
  ``max_concurrent_batches``, ...) go to the config; every other option goes to the engine (``engine_kwargs``:
  ``tensor_parallel_size``, ``max_model_len``, ...).
- any other backend (``hf``, ``openai``, ``oracle``): :meth:`ray.data.Dataset.map_batches` over an actor
  pool, each actor building the backend once (``actors``: the pool's size, ``num_cpus``, ``num_gpus``,
  ``batch_size`` are Ray's; the other options are the backend's, ``concurrency`` too: a backend's windows in
  flight).

``concurrency`` names windows in flight everywhere in rearank; the actors or replicas Ray Data runs are ``actors``.

The engine on the driver (this process) gets the generations as they arrive (``stream``, journaled one by one),
applies them and builds the next round, so dependent windows stay correct. Ray connects to ``RAY_ADDRESS`` when
it is set, else starts a local instance.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from rearank.backends.base import ERROR, LENGTH, RAY_DATA_LLM, STOP, BackendBase, Generation, Prompt, SamplingSettings
from rearank.backends.models import resolve_model
from rearank.backends.registry import BACKENDS, make_backend
from rearank.errors import RearankError
from rearank.grammar import AnswerGrammar

#: ``map_batches`` options taken from ``-O`` for the non-vLLM backends (``actors``: the pool, :func:`actor_pool`).
MAP_OPTIONS = ("actors", "num_cpus", "num_gpus", "batch_size")
#: The engine's ``batch_size`` on Ray: every ready window in one call (a round); Ray splits it into blocks.
ROUND = 2**31 - 1


def _ray() -> Any:
    try:
        import ray
    except ImportError as err:
        raise RearankError(f"--engine ray needs Ray Data ({err}); install it with `pip install 'ray[data]'`") from None
    if not ray.is_initialized():
        ray.init(logging_level="WARNING", log_to_driver=False)
    logging.getLogger("ray.data").setLevel(logging.WARNING)  # one INFO plan/finish pair per round is noise
    return ray


def actor_pool(actors: Any) -> Any:
    """A Ray Data actor pool: ``N`` actors, or ``[MIN, MAX]`` for an autoscaling pool."""
    import ray

    if isinstance(actors, (list, tuple)) and len(actors) == 2:
        return ray.data.ActorPoolStrategy(min_size=int(actors[0]), max_size=int(actors[1]))
    if isinstance(actors, int) and not isinstance(actors, bool) and actors >= 1:
        return ray.data.ActorPoolStrategy(size=actors)
    raise RearankError(f"-O actors must be a number of actors N >= 1 or [MIN, MAX], got {actors!r}")


def prompt_rows(items: Sequence[tuple[int, Prompt]]) -> list[dict[str, Any]]:
    """The Dataset rows of a round: row id, qid, presented docids, the chat messages, the answer grammar (JSON) and
    a pointwise prompt's pair (query, title, text; empty otherwise)."""
    return [{"row": row, "qid": p.qid, "docids": list(p.docids),
             "messages": [{"role": str(m["role"]), "content": str(m["content"])} for m in p.messages],
             "answer": "" if p.answer is None else json.dumps(p.answer.to_dict()), "pair": list(p.pair or ())}
            for row, p in items]


def sampling_params(settings: SamplingSettings) -> dict[str, Any]:
    """vLLM ``SamplingParams`` fields for ``settings`` (a seed only when sampling)."""
    params: dict[str, Any] = {"max_tokens": settings.max_new_tokens, "temperature": settings.temperature,
                              "top_p": settings.top_p}
    if settings.temperature > 0:
        params["seed"] = settings.seed
    return params


def vllm_generation(row: Mapping[str, Any], max_tokens: int) -> Generation:
    """A Ray Data LLM output row as a :class:`Generation`.

    A row with ``__inference_error__`` is a failed window (``error``: the driver keeps its input order);
    a completion that used the whole budget stopped on the token limit (``length``).
    """
    if row.get("__inference_error__"):
        error = " ".join(str(row["__inference_error__"]).split())[:300]
        return Generation(text="", prompt_tokens=0, completion_tokens=0, finish_reason=ERROR, error=error)
    completion = int(row.get("num_generated_tokens") or 0)
    return Generation(text=str(row.get("generated_text") or ""), prompt_tokens=int(row.get("num_input_tokens") or 0),
                      completion_tokens=completion, finish_reason=LENGTH if completion >= max_tokens else STOP,
                      latency_s=max(float(row.get("time_taken_llm") or 0.0), 0.0))


def _keep_generation(row: dict[str, Any]) -> dict[str, Any]:
    keys = ("row", "generated_text", "num_input_tokens", "num_generated_tokens", "time_taken_llm")
    return {key: row.get(key) for key in keys}


def vllm_processor(model: str | None, options: Mapping[str, Any], settings: SamplingSettings, batch_size: int) -> Any:
    """The Ray Data LLM processor (vLLM engine replicas) for ``model``; see the module docstring for ``options``."""
    _ray()
    from ray.data.llm import build_processor, vLLMEngineProcessorConfig

    if "concurrency" in options:
        raise RearankError("-O concurrency is a backend's windows in flight; the vLLM engine replicas of --engine ray "
                           "are -O actors=N")
    fields = set(vLLMEngineProcessorConfig.model_fields) - {"model_source", "engine_kwargs", "concurrency"}
    config = {k: v for k, v in options.items() if k in fields}
    engine = {k: v for k, v in options.items() if k not in fields and k != "actors"}
    if "actors" in options:
        config["concurrency"] = options["actors"]  # Ray Data LLM's name for its engine replicas
    config.setdefault("batch_size", batch_size)
    config.setdefault("should_continue_on_error", True)  # a failed window keeps its order, as in the local path
    engine.setdefault("enable_prefix_caching", True)
    source = resolve_model(model)
    path = source.path if source.gguf_file is None else str(Path(source.path) / source.gguf_file)
    params = sampling_params(settings)
    try:
        processor_config = vLLMEngineProcessorConfig(model_source=path, engine_kwargs=engine, **config)
    except (TypeError, ValueError) as err:
        raise RearankError(f"bad Ray Data LLM options ({err})") from None
    return build_processor(processor_config, preprocess=lambda row: {"sampling_params": params},
                           postprocess=_keep_generation)


def driver_tokenizer(backend: str, model: str | None, options: Mapping[str, Any]) -> Any:
    """The model's tokenizer on the driver (passages are cut to model tokens there), or None for a backend without
    one of the model's (:attr:`~rearank.backends.base.BackendBase.MODEL_TOKENIZER`: API backends, the oracle).

    Loaded as the ``hf`` and ``vllm`` backends load it, so the prompts equal the local path's.
    """
    if not getattr(BACKENDS.get_or_raise(backend), "MODEL_TOKENIZER", False):
        return None
    from transformers import AutoTokenizer

    source = resolve_model(model)
    try:
        return AutoTokenizer.from_pretrained(source.path, gguf_file=source.gguf_file,
                                             trust_remote_code=bool(options.get("trust_remote_code", False)))
    except (OSError, ValueError) as err:
        raise RearankError(f"cannot load the tokenizer of {source.path!r}: {err}") from err


class BackendActor:
    """A Ray Data ``map_batches`` callable: builds a rearank backend once per actor, generates each batch.

    The backend answers in the format of ``method`` (the method object the engine bound; only the oracles care),
    as :class:`rearank.engine.Engine` arranges locally; None leaves it unbound.
    """

    def __init__(self, backend: str, model: str | None, options: dict[str, Any], settings: SamplingSettings,
                 method: Any = None) -> None:
        built = make_backend(backend, model, **options)
        self.backend = built if method is None else built.answer_format(method)
        self.settings = settings

    def __call__(self, batch: Any) -> dict[str, list]:
        rows = batch.to_pylist()
        prompts = [Prompt(messages=tuple(r["messages"]), qid=r["qid"], docids=tuple(r["docids"]),
                          answer=AnswerGrammar.from_dict(json.loads(r["answer"])) if r["answer"] else None,
                          pair=tuple(r["pair"]) if r.get("pair") else None)
                   for r in rows]
        generations = self.backend.generate(prompts, self.settings)
        if len(generations) != len(prompts):
            raise RearankError(f"backend {self.backend.name!r} returned {len(generations)} generations "
                               f"for {len(prompts)} prompts")
        return {"row": [r["row"] for r in rows], "text": [g.text for g in generations],
                "prompt_tokens": [g.prompt_tokens for g in generations],
                "completion_tokens": [g.completion_tokens for g in generations],
                "finish_reason": [g.finish_reason for g in generations],
                "latency_s": [g.latency_s for g in generations],
                "think_tokens": [g.think_tokens for g in generations],
                "think_budget_hit": [g.think_budget_hit for g in generations]}


class RayBackend(BackendBase):
    """Generate on a Ray cluster: Ray Data LLM for a backend that declares it (``vllm``), ``map_batches`` over
    ``backend`` otherwise.

    ``tokenizer`` is what the method cuts passages with on the driver; ``settings`` are fixed when the Ray stage
    is built (vLLM's sampling parameters are part of it).
    """

    name = "ray"

    def __init__(self, backend: str, model: str | None, options: Mapping[str, Any], settings: SamplingSettings,
                 *, batch_size: int = 32, progress: bool = True) -> None:
        ray = _ray()
        ray.data.DataContext.get_current().enable_progress_bars = progress
        self.backend, self.settings = backend, settings
        self.method: Any = None  # what the actors' backends answer for (:meth:`answer_format`)
        options = dict(options)
        self.tokenizer = driver_tokenizer(backend, model, options)
        self.data_llm = BACKENDS.get_or_raise(backend).RAY == RAY_DATA_LLM
        if self.data_llm:
            self.processor = vllm_processor(model, options, settings, batch_size)
        else:
            stage = {k: options.pop(k) for k in MAP_OPTIONS if k in options}
            stage.setdefault("batch_size", batch_size)
            stage["compute"] = actor_pool(stage.pop("actors", 1))
            self._actors = (backend, model, options, settings), stage

    def answer_format(self, method: Any) -> RayBackend:
        """This backend with every actor's backend answering in ``method``'s format (the oracles care)."""
        bound = copy.copy(self)
        bound.method = method
        return bound

    def stream(self, prompts: Sequence[Prompt], settings: SamplingSettings) -> Iterator[tuple[int, Generation]]:
        """A Dataset of ``prompts`` through the stage; yields ``(position, generation)`` as they arrive."""
        import ray

        rows = ray.data.from_items(prompt_rows(list(enumerate(prompts))))
        if self.data_llm:
            dataset = self.processor(rows)
        else:
            args, stage = self._actors
            dataset = rows.map_batches(BackendActor, fn_constructor_args=(*args, self.method), batch_format="pyarrow",
                                       **stage)
        for row in dataset.iter_rows():
            if self.data_llm:
                yield int(row["row"]), vllm_generation(row, self.settings.max_new_tokens)
            else:
                yield int(row["row"]), Generation(
                    text=row["text"], prompt_tokens=int(row["prompt_tokens"]),
                    completion_tokens=int(row["completion_tokens"]), finish_reason=row["finish_reason"],
                    latency_s=float(row["latency_s"]), think_tokens=None if row["think_tokens"] is None else int(row["think_tokens"]),
                    think_budget_hit=bool(row["think_budget_hit"]))

    def generate(self, prompts: Sequence[Prompt], settings: SamplingSettings) -> list[Generation]:
        """The generations of :meth:`stream`, in the order of ``prompts``."""
        out: list[Generation | None] = [None] * len(prompts)
        for position, generation in self.stream(prompts, settings):
            out[position] = generation
        if any(g is None for g in out):
            raise RearankError(f"Ray returned {sum(g is None for g in out)} of {len(prompts)} windows empty")
        return out  # type: ignore[return-value]
