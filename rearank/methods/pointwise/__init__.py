"""Pointwise reranking: a scorer f(query, passage) -> score (the RRPO policy) and a reranker sorting by it."""

from rearank.methods.pointwise.ranker import PointwiseReranker
from rearank.methods.pointwise.scorer import KINDS, PointwiseScorer

__all__ = ["KINDS", "PointwiseReranker", "PointwiseScorer"]
