"""Pointwise reranking (:class:`Pointwise`): every top-k passage scored on its own, by a scorer backend
(``--backend scorer``: RRPO's policy, a cross-encoder) or an LLM answering yes/no; sorted by score."""

from rearank.methods.pointwise.method import Pointwise, parse_score

__all__ = ["Pointwise", "parse_score"]
