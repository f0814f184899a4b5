"""The ``scorer`` backend: a :class:`~rearank.methods.pointwise.scorer.PointwiseScorer` answering each pointwise
prompt (:class:`~rearank.methods.pointwise.method.Pointwise`) with its score as text."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from typing import Any

from rearank.backends.base import BackendBase, Generation, Prompt, SamplingSettings
from rearank.backends.options import Option
from rearank.errors import RearankError
from rearank.methods.pointwise.scorer import PointwiseScorer


class ScorerBackend(BackendBase):
    """Score pointwise prompts with a saved RRPO scorer, a cross-encoder or a causal LM (``kind``: seqcls or
    causal-yes), greedy and deterministic; the prompts of one query in a call are scored together."""

    name = "scorer"
    FOR_METHODS = ("pointwise",)
    OPTIONS = (Option("kind", "str"), Option("device", "str"), Option("num_layers", "int", minimum=1),
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
