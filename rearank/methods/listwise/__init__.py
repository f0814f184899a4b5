"""Listwise reranking (Rearank / RankGPT): sliding windows over the top-k, each answered with a permutation.

The method is :class:`Listwise` (:mod:`.method`, ``rearank rerank --method listwise``); beside it its answer
parser (:mod:`.answer`, shared by inference and reward), its schedule (:mod:`.window`) and the verl reward
(:mod:`.reward`; recipes give verl ``pkg://rearank.methods.listwise.reward``). Its templates
(``rearank``, ``rankgpt``) stay in the one template registry, :mod:`rearank.prompts`.
"""

from rearank.methods.listwise.method import Listwise, QueryState

__all__ = ["Listwise", "QueryState"]
