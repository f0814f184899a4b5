"""Reranking methods, each satisfying :class:`rearank.methods.base.Method`; the engine (:mod:`rearank.engine`)
runs any of them.

:data:`METHODS` names the ones that rerank with a chat LLM: rearank's ``listwise`` (sliding windows,
Rearank/RankGPT) and ``groupwise`` (GroupRank), and those other packages register under the entry-point group
``rearank.methods`` (:mod:`rearank.plugins`), and ``pointwise`` (:mod:`rearank.methods.pointwise`: each passage
scored on its own, by the ``scorer`` backend or an LLM's yes/no).

A method is a frozen dataclass; its fields but ``tokenizer`` are its options (:func:`method_options`), given by
keyword to the face and as flags on the command line (:mod:`rearank.flags`, which reads a method's ``FLAGS``).
"""

from dataclasses import MISSING, fields
from typing import Any

from rearank.methods.base import Method, Task
from rearank.methods.groupwise import Groupwise
from rearank.methods.listwise import Listwise
from rearank.methods.pointwise.method import Pointwise
from rearank.plugins import Registry

#: Method name -> class; ``METHODS[name](**settings)`` builds one (settings are checked then).
METHODS = Registry("rearank.methods", "method", {"listwise": lambda: Listwise, "groupwise": lambda: Groupwise,
                                                   "pointwise": lambda: Pointwise})


def method_options(method: str) -> list[str]:
    """The settings of ``method`` a user gives (by keyword to the face, as flags on the command line, recorded in a
    run's settings): its fields but the tokenizer, each under its field's name (``template``, ``top_k``, ...)."""
    return [f.name for f in fields(METHODS.get_or_raise(method)) if f.name != "tokenizer"]


def option_default(method: str, option: str) -> Any:
    """The default of ``option`` (a name of :func:`method_options`) of ``method``; None if it has none."""
    field = next(f for f in fields(METHODS.get_or_raise(method)) if f.name == option)
    return None if field.default is MISSING else field.default


__all__ = ["METHODS", "Groupwise", "Listwise", "Method", "Pointwise", "Task", "method_options", "option_default"]
