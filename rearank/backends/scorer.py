"""The ``scorer`` backend and the pointwise scorer it wraps: a Hugging Face cross-encoder (sequence classification)
or a causal LM scored by the log-odds of "yes" after the relevance question (:mod:`rearank.prompts.relevance`).
Both are differentiable, so RRPO trains a :class:`PointwiseScorer` directly; :class:`ScorerBackend` answers each
prompt of the Pointwise method (``--method pointwise --backend scorer``) with its passage's score as text.

A saved scorer is a ``save_pretrained`` folder (model + tokenizer) with ``rearank_scorer.json`` holding its kind
and passage budget; :meth:`PointwiseScorer.load` reads it back, and also takes a hub id, a plain local folder or
``embedded`` (SmolLM2-135M-Instruct, scored as ``causal-yes``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from itertools import groupby
from pathlib import Path
from typing import Any

from rearank.backends.base import SCORER, BackendBase, Generation, Prompt, SamplingSettings
from rearank.backends.models import is_embedded, resolve_model
from rearank.backends.options import Option
from rearank.errors import RearankError
from rearank.io.files import atomic_folder
from rearank.prompts import truncate_texts
from rearank.prompts.relevance import relevance_passage, relevance_text

KINDS = ("seqcls", "causal-yes")
META_FILE = "rearank_scorer.json"

#: Tokens kept of each passage (words when there is no tokenizer).
MAX_PASSAGE_TOKENS = 300


class PointwiseScorer:
    """``scores(query, docs)`` -> a 1-D torch tensor, one score per ``(title, text)`` document.

    ``kind``: ``seqcls`` (one logit, or logit[1] - logit[0] for two labels) or ``causal-yes``
    (logit("yes") - logit("no") at the answer position). Gradients flow when the caller enables them.
    """

    def __init__(self, model: Any, tokenizer: Any, kind: str, max_passage_tokens: int = MAX_PASSAGE_TOKENS,
                 batch_size: int = 16) -> None:
        if kind not in KINDS:
            raise RearankError(f"unknown scorer kind {kind!r}; choose one of {', '.join(KINDS)}")
        import torch

        self._torch = torch
        self.model, self.tokenizer, self.kind = model, tokenizer, kind
        self.max_passage_tokens = max_passage_tokens
        self.batch_size = batch_size
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        if kind == "causal-yes":
            tokenizer.padding_side = "left"  # the answer position is the last one of every row
            self._yes, self._no = (tokenizer.encode(w, add_special_tokens=False)[0] for w in ("yes", "no"))
        elif getattr(model.config, "pad_token_id", None) is None:
            model.config.pad_token_id = tokenizer.pad_token_id

    @property
    def device(self) -> Any:
        return next(self.model.parameters()).device

    @classmethod
    def load(cls, name: str | os.PathLike | None, kind: str | None = None, *, device: str | None = None,
             num_layers: int | None = None, max_passage_tokens: int | None = None, batch_size: int = 16,
             trust_remote_code: bool = False) -> PointwiseScorer:
        """Load a saved scorer, a hub id / local folder (``kind`` from the config's architecture when not given)
        or ``embedded``. ``num_layers`` keeps only the first N transformer layers (a smaller, faster scorer)."""
        try:
            import torch
            from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer
        except ImportError as err:
            raise RearankError(f"pointwise scorers need torch and transformers ({err}); install `rearank[hf]`") from err
        meta: dict[str, Any] = {}
        if name is not None and not is_embedded(str(name)) and (Path(name) / META_FILE).is_file():
            meta = json.loads((Path(name) / META_FILE).read_text(encoding="utf-8"))
        source = resolve_model(None if name is None else str(name))
        try:
            config = AutoConfig.from_pretrained(source.path, gguf_file=source.gguf_file,
                                                trust_remote_code=trust_remote_code)
        except (OSError, ValueError) as err:
            raise RearankError(f"cannot load scorer {name!r}: {err}. Pass a local folder, a saved scorer, "
                               "a reachable hub id, or 'embedded'") from err
        kind = kind or meta.get("kind") or _kind_of(config)
        extra: dict[str, Any] = {}
        if num_layers is not None:
            total = getattr(config, "num_hidden_layers", None)
            if total is None or not 1 <= num_layers <= total:
                raise RearankError(f"num_layers must be between 1 and the model's {total} layers, got {num_layers}")
            extra["num_hidden_layers"] = num_layers
        auto = AutoModelForCausalLM if kind == "causal-yes" else AutoModelForSequenceClassification
        try:
            tokenizer = AutoTokenizer.from_pretrained(source.path, gguf_file=source.gguf_file,
                                                      trust_remote_code=trust_remote_code)
            model = auto.from_pretrained(source.path, gguf_file=source.gguf_file, dtype=torch.float32,
                                         trust_remote_code=trust_remote_code, **extra)
        except (OSError, ValueError) as err:
            raise RearankError(f"cannot load scorer {name!r} as {kind}: {err}") from err
        model.to(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        model.eval()
        budget = max_passage_tokens or meta.get("max_passage_tokens") or MAX_PASSAGE_TOKENS
        return cls(model, tokenizer, kind, max_passage_tokens=budget, batch_size=batch_size)

    def _encode(self, query: str, docs: Sequence[tuple[str, str]]) -> Any:
        texts = truncate_texts([" ".join(text.split()) for _, text in docs], self.max_passage_tokens, self.tokenizer)
        passages = [relevance_passage(title, text) for (title, _), text in zip(docs, texts)]
        if self.kind == "seqcls":
            return self.tokenizer([query] * len(passages), passages, padding=True, truncation="only_second",
                                  max_length=min(512, self.max_passage_tokens + 128), return_tensors="pt")
        prompts = [self._causal_prompt(query, p) for p in passages]
        return self.tokenizer(prompts, padding=True, add_special_tokens=False, return_tensors="pt")

    def _causal_prompt(self, query: str, passage: str) -> str:
        content = relevance_text(query, passage)
        if self.tokenizer.chat_template:
            return self.tokenizer.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                                      add_generation_prompt=True)
        return f"{content}\nAnswer:"

    def scores(self, query: str, docs: Sequence[tuple[str, str]]) -> Any:
        """Scores of ``(title, text)`` documents for ``query`` (grad-enabled unless the caller disables it)."""
        torch = self._torch
        if not docs:
            return torch.zeros(0, device=self.device)
        parts = []
        for start in range(0, len(docs), self.batch_size):
            enc = self._encode(query, docs[start:start + self.batch_size]).to(self.device)
            if self.kind == "seqcls":
                logits = self.model(**enc).logits
                parts.append(logits[:, 0] if logits.shape[1] == 1 else logits[:, 1] - logits[:, 0])
            else:
                logits = self.model(**enc, logits_to_keep=1).logits[:, -1, :]
                parts.append(logits[:, self._yes] - logits[:, self._no])
        return torch.cat(parts).float()

    def save(self, path: str | os.PathLike) -> None:
        """Write the scorer to ``path`` (a folder), write-then-rename; an existing folder is replaced."""
        with atomic_folder(path, replace=True) as tmp:
            self.model.save_pretrained(tmp)
            self.tokenizer.save_pretrained(tmp)
            meta = {"kind": self.kind, "max_passage_tokens": self.max_passage_tokens}
            (tmp / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")


def _kind_of(config: Any) -> str:
    archs = " ".join(getattr(config, "architectures", None) or [])
    if "SequenceClassification" in archs:
        return "seqcls"
    if "CausalLM" in archs:
        return "causal-yes"
    raise RearankError(f"cannot tell the scorer kind of architectures {archs!r}; pass kind= one of {KINDS}")


class ScorerBackend(BackendBase):
    """Score pointwise prompts with a saved RRPO scorer, a cross-encoder or a causal LM (``kind``: seqcls or
    causal-yes), greedy and deterministic; the prompts of one query in a call are scored together."""

    name = "scorer"
    ROLE = SCORER
    FOR_METHODS = ("pointwise",)
    #: Up to 256 prompts a call: it scores them through the model ``batch_size`` at a time.
    BATCH_SIZE = 256
    OPTIONS = (Option("kind", "str"), Option("device", "device"), Option("num_layers", "int", minimum=1),
               Option("max_passage_tokens", "int", minimum=1), Option("batch_size", "int", minimum=1),
               Option("trust_remote_code", "bool", nullable=False))

    def __init__(self, model: str | PointwiseScorer | None = None, *, kind: str | None = None,
                 device: str | None = None, num_layers: int | None = None, max_passage_tokens: int | None = None,
                 batch_size: int = 16, trust_remote_code: bool = False) -> None:
        """``model``: a loaded scorer, or what :meth:`PointwiseScorer.load` takes (default: ``embedded``)."""
        self.scorer = model if isinstance(model, PointwiseScorer) else PointwiseScorer.load(
            model or "embedded", kind, device=device, num_layers=num_layers, max_passage_tokens=max_passage_tokens,
            batch_size=batch_size, trust_remote_code=trust_remote_code)

    def answer_format(self, method: Any) -> ScorerBackend:
        if getattr(method, "name", None) not in self.FOR_METHODS:
            raise RearankError(f"the scorer backend scores one passage a prompt: use it with --method pointwise, "
                               f"not {getattr(method, 'name', method)!r}")
        return self

    def generate(self, prompts: Sequence[Prompt], settings: SamplingSettings) -> list[Generation]:
        import torch

        if any(p.pair is None for p in prompts):
            raise RearankError("the scorer backend got a prompt without a (query, passage) pair; "
                               "it scores the prompts of --method pointwise only")
        out: list[Generation] = []
        with torch.inference_mode():
            for query, group in groupby((p.pair for p in prompts), key=lambda pair: pair[0]):  # type: ignore[index]
                docs = [(title, text) for _, title, text in group]
                scores = self.scorer.scores(query, docs).tolist()
                out += [Generation(text=repr(float(s)), prompt_tokens=0, completion_tokens=0) for s in scores]
        return out
