"""Listwise reranking (Rearank / RankGPT): windows over the top-k, each answered with a permutation.

The method is :class:`Listwise` (:mod:`.method`, ``rearank rerank --method listwise``); beside it its reorder
policies (:mod:`.policies`: sliding windows, top-down partitioning), their schedules (:mod:`.window`,
:mod:`.tdpart`), its answer parser (:mod:`.answer`, shared by inference and reward) and the verl reward
(:mod:`.reward`; recipes give verl ``pkg://rearank.methods.listwise.reward``). Its templates (``rearank``,
``rankgpt``) stay in the one template registry, :mod:`rearank.prompts`.
"""

from rearank.methods.listwise.method import Listwise
from rearank.methods.listwise.policies import QueryState

__all__ = ["Listwise", "QueryState"]
