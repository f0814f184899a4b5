"""Reranking methods, each satisfying :class:`rearank.methods.base.Method`; the engine (:mod:`rearank.engine`)
runs any of them.

:data:`METHODS` names the ones that rerank with a chat LLM: ``listwise`` (sliding windows, Rearank/RankGPT) and
``groupwise`` (GroupRank). :mod:`rearank.methods.pointwise` scores each passage with a small model (RRPO's
policy); it needs torch and is not imported here.
"""

from rearank.methods.base import Method, Task
from rearank.methods.groupwise import Groupwise
from rearank.methods.listwise import Listwise

#: Method name -> class; ``METHODS[name](**settings)`` builds one (settings are checked then).
METHODS: dict[str, type] = {"listwise": Listwise, "groupwise": Groupwise}

__all__ = ["METHODS", "Groupwise", "Listwise", "Method", "Task"]
