"""vLLM's async engine in this process: windows stream in and out one by one (``--backend vllm-async``).

The offline ``vllm`` backend hands vLLM one list of prompts per call and waits for its slowest answer. This one
runs ``vllm.AsyncLLMEngine`` on an event loop in a background thread and takes one prompt per call from many
threads (``calls = "concurrent"``), so the reranking engine keeps ``concurrency`` windows in flight (``auto``: it
measures and grows the count) and vLLM's continuous batching adds each new window to the running batch as soon as
it is sent. Prompts are the model's chat template applied here, tokenized without special tokens, as the ``hf``
backend does; greedy answers equal the offline backend's (``tests/vllm``).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Sequence
from typing import Any

from rearank.backends.base import AUTO, CONCURRENT, LENGTH, STOP, BackendBase, Generation, Prompt, SamplingSettings
from rearank.backends.options import Option
from rearank.backends.vllm import AnswerRequests, import_vllm, template_kwargs, vllm_model


class VLLMAsyncBackend(BackendBase):
    """Generate with ``vllm.AsyncLLMEngine``; ``model`` as for the ``vllm`` backend (default: the embedded SmolLM2).

    Extra keyword options go to ``vllm.AsyncEngineArgs`` (``max_model_len``, ``gpu_memory_utilization``,
    ``kv_cache_memory_bytes``, ``enforce_eager``, …). ``concurrency`` (windows in flight, or ``auto``) is the
    engine's setting: checked here with the other options, given to the engine by whoever builds it
    (:meth:`rearank.run.config.RunConfig.engine`).
    ``constrain`` and ``max_think_tokens`` as for the hf backend (through vLLM's logits processors).
    """

    name = "vllm-async"
    MODEL_TOKENIZER = True
    LOCAL_MODEL = True
    calls = CONCURRENT
    OPTIONS = (Option("concurrency", "count", minimum=1, nullable=False),
               Option("tensor_parallel_size", "int", minimum=1, nullable=False),
               Option("enable_prefix_caching", "bool", nullable=False), Option("dtype", "str", nullable=False),
               Option("seed", "int", nullable=False), Option("enable_thinking", "bool"),
               Option("max_think_tokens", "int", minimum=0))

    def __init__(self, model: str | None = None, *, concurrency: int | str = AUTO, tensor_parallel_size: int = 1,
                 enable_prefix_caching: bool = True, dtype: str = "auto", seed: int = 0,
                 enable_thinking: bool | None = None, constrain: str | None = None,
                 max_think_tokens: int | None = None, **engine_options: Any) -> None:
        self.answers = AnswerRequests(model, constrain, max_think_tokens, self.name)
        self._vllm = vllm = import_vllm()
        path = vllm_model(model)
        args = vllm.AsyncEngineArgs(model=path, tensor_parallel_size=tensor_parallel_size,
                                    enable_prefix_caching=enable_prefix_caching, dtype=dtype, seed=seed,
                                    **self.answers.engine_options(), **engine_options)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="rearank-vllm-async", daemon=True)
        self._thread.start()
        self._ids = itertools.count()
        self.engine = self._wait(self._start(args))
        self.answers.bind(self.tokenizer)
        self.template_kwargs = template_kwargs(self.tokenizer, enable_thinking, path)

    async def _start(self, args: Any) -> Any:
        engine = self._vllm.AsyncLLMEngine.from_engine_args(args)
        self.tokenizer = engine.tokenizer if hasattr(engine, "tokenizer") else await engine.get_tokenizer()
        return engine

    def _wait(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def generate(self, prompts: Sequence[Prompt], settings: SamplingSettings) -> list[Generation]:
        """Send every prompt to the running engine at once; return when all are answered, in order."""
        futures = [asyncio.run_coroutine_threadsafe(self._one(p, settings), self._loop) for p in prompts]
        return [f.result() for f in futures]

    async def _one(self, prompt: Prompt, settings: SamplingSettings) -> Generation:
        params = self.answers.params(self._vllm, prompt, settings)
        began = time.perf_counter()
        text = self.tokenizer.apply_chat_template(list(prompt.messages), tokenize=False, add_generation_prompt=True,
                                                  **self.template_kwargs)
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        final = None
        async for output in self.engine.generate({"prompt_token_ids": ids}, params, f"rearank-{next(self._ids)}"):
            final = output
        best = final.outputs[0]
        return Generation(text=best.text, prompt_tokens=len(ids), completion_tokens=len(best.token_ids),
                          finish_reason=LENGTH if best.finish_reason == "length" else STOP,
                          latency_s=time.perf_counter() - began,
                          **self.answers.outcome(prompt, settings, best.token_ids))

    async def _stop(self) -> None:
        self.engine.shutdown()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def close(self) -> None:
        """Stop vLLM's engine and the event loop thread."""
        if self._loop.is_closed():
            return
        self._wait(self._stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
