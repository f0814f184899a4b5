"""Rerank requests by a pointwise scorer: every top-k candidate scored independently, sorted by score."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tqdm import tqdm

from rearank.methods.pointwise.scorer import PointwiseScorer
from rearank.types import Request, Result


class PointwiseReranker:
    """Sort each request's first ``top_k`` candidates by ``scorer`` (ties keep their order); the rest follow."""

    def __init__(self, scorer: PointwiseScorer, top_k: int = 100) -> None:
        self.scorer, self.top_k = scorer, top_k

    def order(self, request: Request) -> list[int]:
        """Candidate indices in reranked order."""
        import torch

        n = min(self.top_k, len(request.candidates))
        docs = [(c.title, c.text) for c in request.candidates[:n]]
        with torch.inference_mode():
            scores = self.scorer.scores(request.query.text, docs).tolist()
        head = sorted(range(n), key=lambda i: -scores[i])
        return head + list(range(n, len(request.candidates)))

    def close(self) -> None:
        """Nothing to release: the scorer is plain PyTorch."""

    def rerank(self, requests: Sequence[Request], on_result: Callable[[Result], None] | None = None,
               progress: bool = True) -> list[Result]:
        """Rerank every request, calling ``on_result`` as each one finishes (the driver's interface)."""
        results = []
        for request in tqdm(requests, unit="query", disable=not progress, desc="rerank", dynamic_ncols=True):
            result = Result(request.query, [request.candidates[i] for i in self.order(request)])
            results.append(result)
            if on_result is not None:
                on_result(result)
        return results
