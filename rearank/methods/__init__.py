"""Reranking methods, each satisfying :class:`rearank.methods.base.Method`; the engine (:mod:`rearank.engine`)
runs any of them.

:data:`METHODS` names the ones that rerank with a chat LLM: ``listwise`` (sliding windows, Rearank/RankGPT) and
``groupwise`` (GroupRank). :mod:`rearank.methods.pointwise` scores each passage with a small model (RRPO's
policy); it needs torch and is not imported here.
"""

from dataclasses import fields

from rearank.methods.base import Method, Task
from rearank.methods.groupwise import Groupwise
from rearank.methods.listwise import Listwise

#: Method name -> class; ``METHODS[name](**settings)`` builds one (settings are checked then).
METHODS: dict[str, type] = {"listwise": Listwise, "groupwise": Groupwise}


def method_options(method: str) -> list[str]:
    """The settings of ``method`` a user gives (by keyword to the face, as flags on the command line): its fields
    but the tokenizer, the template under the name ``prompt``."""
    names = [f.name for f in fields(METHODS[method]) if f.name != "tokenizer"]
    return ["prompt" if n == "template" else n for n in names]


__all__ = ["METHODS", "Groupwise", "Listwise", "Method", "Task", "method_options"]
