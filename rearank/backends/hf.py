"""transformers backend: batched ``generate`` with left padding and the model's chat template, CPU or GPU."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from rearank.backends.base import (
    LENGTH,
    STOP,
    BackendBase,
    Generation,
    Prompt,
    SamplingSettings,
    has_thinking_switch,
    thinking_kwargs,
)
from rearank.backends.constrain import Decoding, build_vocabulary, check_constrain, think_outcome
from rearank.backends.models import is_embedded, resolve_model
from rearank.backends.options import Option
from rearank.errors import RearankError

_DTYPES = ("auto", "float32", "bfloat16", "float16")


class HFBackend(BackendBase):
    """Generate with a transformers causal LM (default: the embedded SmolLM2-135M-Instruct).

    ``model``: hub id, local folder, ``.gguf`` file, or an embedded name (see :mod:`rearank.backends.models`).
    ``device``: ``cpu``/``cuda``/``cuda:1``…; default ``cuda`` when available. ``dtype``: default
    float32 on CPU, ``auto`` elsewhere (bfloat16 when the GPU supports it, else float16).
    ``batch_size`` prompts go through one ``generate`` call; prompts are grouped by length first
    to keep padding small. Default: 8 on a GPU, 1 on CPU, where padded batches measured slower than one
    prompt at a time (``bench/bench_driver.py``).

    ``constrain=answer`` lets the model write only the answer format its method declares once the answer part
    starts (default for the embedded model; ``off`` elsewhere); ``max_think_tokens=N`` closes the reasoning after
    N tokens (:mod:`rearank.backends.constrain`).
    """

    name = "hf"
    MODEL_TOKENIZER = True
    LOCAL_MODEL = True
    EMBEDDED_SHORT_BUDGET = True
    OPTIONS = (Option("device", "device"), Option("dtype", "str"), Option("batch_size", "int", minimum=1),
               Option("trust_remote_code", "bool", nullable=False), Option("enable_thinking", "bool"),
               Option("max_think_tokens", "int", minimum=0))

    def __init__(self, model: str | None = None, *, device: str | None = None, dtype: str | None = None,
                 batch_size: int | None = None, trust_remote_code: bool = False,
                 enable_thinking: bool | None = None, constrain: str | None = None,
                 max_think_tokens: int | None = None) -> None:
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as err:
            raise RearankError(f"the hf backend needs torch and transformers ({err}); install `rearank[hf]` "
                               "(CPU: `pip install torch==2.13.0` first)") from err
        if batch_size is not None and batch_size < 1:
            raise RearankError(f"batch_size must be >= 1, got {batch_size}")
        if dtype is not None and dtype not in _DTYPES:
            raise RearankError(f"unknown dtype {dtype!r}; choose one of {', '.join(_DTYPES)}")
        self.constrain = check_constrain(("answer" if is_embedded(model) else "off") if constrain is None else constrain,
                                         self.name)
        self.max_think_tokens = max_think_tokens
        self._vocabulary: Any = None
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.batch_size = batch_size or (1 if self.device == "cpu" else 8)
        self._torch = torch
        source = resolve_model(model)
        self.model_path = source.path
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(source.path, gguf_file=source.gguf_file,
                                                           trust_remote_code=trust_remote_code)
            self.model = AutoModelForCausalLM.from_pretrained(
                source.path, gguf_file=source.gguf_file, dtype=self._torch_dtype(dtype),
                trust_remote_code=trust_remote_code).to(self.device)
        except (OSError, ValueError) as err:
            raise RearankError(f"cannot load model {source.path!r}: {err}. Pass a local folder, a .gguf file, "
                               "a reachable hub id, or 'embedded'") from err
        self.model.eval()
        if not self.tokenizer.chat_template:
            raise RearankError(f"model {source.path!r} has no chat template; use an instruction-tuned model")
        if enable_thinking is not None and not has_thinking_switch(self.tokenizer.chat_template):
            raise RearankError(f"enable_thinking: the chat template of {source.path!r} has no thinking switch")
        self.template_kwargs = thinking_kwargs(enable_thinking)
        self.tokenizer.padding_side = "left"
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        self._eos_ids = set(eos if isinstance(eos, list) else [eos]) - {None}
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token_id = min(self._eos_ids)

    def _torch_dtype(self, dtype: str | None) -> Any:
        torch = self._torch
        if dtype is None:
            dtype = "float32" if self.device == "cpu" else "auto"
        if dtype == "auto":
            if self.device == "cpu":
                return torch.float32
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return getattr(torch, dtype)

    def generate(self, prompts: Sequence[Prompt], settings: SamplingSettings) -> list[Generation]:
        """Generate for every prompt; batches of similar length, results in input order."""
        texts = [self.tokenizer.apply_chat_template(list(p.messages), tokenize=False, add_generation_prompt=True,
                                                    **self.template_kwargs) for p in prompts]
        lengths = [len(self.tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: lengths[i])
        results: list[Generation | None] = [None] * len(texts)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start:start + self.batch_size]
            batch = self._generate_batch([texts[i] for i in chunk], [prompts[i] for i in chunk], settings)
            for i, gen in zip(chunk, batch):
                results[i] = gen
        return [g for g in results if g is not None]

    def _decodings(self, prompts: Sequence[Prompt], settings: SamplingSettings) -> list[Decoding | None]:
        """The token filter of each prompt that declares an answer grammar, when constraining or capping thought."""
        if not self.constrain and self.max_think_tokens is None:
            return [None] * len(prompts)
        if self._vocabulary is None and any(p.answer for p in prompts):
            self._vocabulary = build_vocabulary(self.tokenizer, sorted(self._eos_ids), len(self.tokenizer))
        return [None if p.answer is None else
                Decoding(p.answer, self._vocabulary, constrain=self.constrain, max_think_tokens=self.max_think_tokens,
                         max_new_tokens=settings.max_new_tokens) for p in prompts]

    def _generate_batch(self, texts: list[str], prompts: Sequence[Prompt],
                        settings: SamplingSettings) -> list[Generation]:
        torch = self._torch
        began = time.perf_counter()
        enc = self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
        sampling: dict[str, Any] = {"do_sample": False}
        if settings.temperature > 0:
            torch.manual_seed(settings.seed)
            sampling = {"do_sample": True, "temperature": settings.temperature, "top_p": settings.top_p, "top_k": 0}
        decodings = self._decodings(prompts, settings)
        if any(decodings):
            from transformers import LogitsProcessorList

            sampling["logits_processor"] = LogitsProcessorList([_TokenFilter(decodings, enc["input_ids"].shape[1])])
        with torch.inference_mode():
            out = self.model.generate(**enc, max_new_tokens=settings.max_new_tokens,
                                      pad_token_id=self.tokenizer.pad_token_id, eos_token_id=sorted(self._eos_ids),
                                      **sampling)
        new_tokens = out[:, enc["input_ids"].shape[1]:].tolist()
        prompt_tokens = enc["attention_mask"].sum(dim=1).tolist()
        latency = time.perf_counter() - began
        generations = []
        for row, n_prompt, decoding in zip(new_tokens, prompt_tokens, decodings):
            stop_at = next((j for j, tok in enumerate(row) if tok in self._eos_ids), None)
            kept = row if stop_at is None else row[:stop_at + 1]
            reason = STOP if stop_at is not None or len(kept) < settings.max_new_tokens else LENGTH
            think_tokens, budget_hit = (None, False) if decoding is None else think_outcome(
                decoding.grammar, decoding.budget, decoding.vocabulary.decode, kept)
            generations.append(Generation(text=self.tokenizer.decode(kept, skip_special_tokens=True),
                                          prompt_tokens=int(n_prompt), completion_tokens=len(kept),
                                          finish_reason=reason, latency_s=latency, think_tokens=think_tokens,
                                          think_budget_hit=budget_hit))
        return generations


class _TokenFilter:
    """A transformers logits processor: each row's :class:`Decoding` masks the tokens it does not allow."""

    def __init__(self, decodings: list[Decoding | None], prompt_length: int) -> None:
        self.decodings, self.prompt_length = decodings, prompt_length

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        generated = input_ids[:, self.prompt_length:].tolist()
        for row, decoding in enumerate(self.decodings):
            if decoding is None:
                continue
            allowed, banned = decoding.step(generated[row])
            if allowed is not None:
                keep = scores[row, allowed].clone()
                scores[row, :] = float("-inf")
                scores[row, allowed] = keep
            elif banned:
                scores[row, list(banned)] = float("-inf")
        return scores
