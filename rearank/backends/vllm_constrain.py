"""The vLLM logits processor of constrained answers and the think budget (:mod:`rearank.backends.constrain`).

vLLM loads it in its engine process: the ``vllm`` and ``vllm-async`` backends pass it when they build the engine;
a server gets it with ``vllm serve MODEL --logits-processors`` :data:`rearank.backends.constrain.LOGITS_PROCESSOR`
(then ``-O structured_output=rearank`` on the ``openai`` backend). A request asks for it with
``SamplingParams.extra_args`` (a server's ``vllm_xargs``) made by :func:`rearank.backends.constrain.request_args`:
the answer grammar, the constraint switch, the think budget and ``max_new_tokens``.
"""

from __future__ import annotations

import json
from typing import Any

import torch
from vllm.v1.sample.logits_processor import AdapterLogitsProcessor

from rearank.backends.constrain import EXTRA_KEY, Decoding, Vocabulary, build_vocabulary, model_eos_ids
from rearank.grammar import AnswerGrammar


class AnswerLogitsProcessor(AdapterLogitsProcessor):
    """One :class:`rearank.backends.constrain.Decoding` per request that carries :data:`EXTRA_KEY`; the model's
    tokenizer and end-of-sequence ids are read once, when the first such request arrives."""

    def __init__(self, vllm_config: Any, device: Any, is_pin_memory: bool) -> None:
        super().__init__(vllm_config, device, is_pin_memory)
        self._model_config = vllm_config.model_config
        self._vocabulary_built: Vocabulary | None = None

    def is_argmax_invariant(self) -> bool:
        return False

    def _vocabulary(self) -> Vocabulary:
        if self._vocabulary_built is None:
            from transformers import AutoTokenizer

            config = self._model_config
            tokenizer = AutoTokenizer.from_pretrained(config.tokenizer, trust_remote_code=config.trust_remote_code)
            eos_ids = model_eos_ids(tokenizer, config.model)
            self._vocabulary_built = build_vocabulary(tokenizer, eos_ids, config.get_vocab_size())
        return self._vocabulary_built

    def new_req_logits_processor(self, params: Any) -> Any:
        spec = (params.extra_args or {}).get(EXTRA_KEY)
        if not spec:
            return None
        if isinstance(spec, str):
            spec = json.loads(spec)
        decoding = Decoding(AnswerGrammar.from_dict(spec["grammar"]), self._vocabulary(),
                            constrain=bool(spec["constrain"]), max_think_tokens=spec.get("max_think_tokens"),
                            max_new_tokens=int(spec["max_new_tokens"]))

        def apply(output_ids: list[int], logits: torch.Tensor) -> torch.Tensor:
            allowed, banned = decoding.step(output_ids)
            if allowed is not None:
                keep = logits[allowed].clone()
                logits[:] = float("-inf")
                logits[allowed] = keep
            elif banned:
                logits[list(banned)] = float("-inf")
            return logits

        return apply
