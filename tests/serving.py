"""Test helpers: an oracle rerank service judging by text, served on 127.0.0.1 in a thread for real HTTP clients."""

from __future__ import annotations

from rearank.api import Reranker
from rearank.server import Limits, RerankService, TextJudge, serve_in_thread

running = serve_in_thread


def oracle_service(topics: dict[str, str], docs: dict[str, tuple[str, str]], qrels: dict[str, dict[str, int]],
                   *, model_name: str = "rearank-oracle", method: str = "listwise",
                   options: dict[str, object] | None = None, **service: object) -> RerankService:
    """A service over the oracle backend judging requests by text (default: windows of 4 by 2, groups of 4)."""
    judge = TextJudge(topics, docs, qrels)
    if options is None:
        options = {"window": 4, "step": 2} if method == "listwise" else {"group_size": 4}
    reranker = Reranker(backend="oracle", qrels=judge.live, method=method, **options)
    limits = service.pop("limits", None) or Limits()
    return RerankService(reranker, model_name=model_name, judge=judge, limits=limits, **service)
