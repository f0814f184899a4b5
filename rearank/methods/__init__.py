"""Reranking methods, each satisfying :class:`rearank.methods.base.Method`; the engine (:mod:`rearank.engine`)
runs any of them.

A ranking method is its card (:mod:`rearank.methods.card`, kind ``rank``): the card carries its ``Method`` class,
presets and default backend. :data:`METHODS` is the view of those classes over the one registry of cards:
rearank's ``listwise`` (sliding windows, Rearank/RankGPT), ``groupwise`` (GroupRank) and ``pointwise`` (each
passage scored on its own, by the ``scorer`` backend or an LLM's yes/no), and the ranking cards other packages
register under the entry-point group ``rearank.cards``.

A method is a frozen dataclass; its fields but ``tokenizer`` are its options (:func:`method_options`), given by
keyword to the face and as flags on the command line (:mod:`rearank.flags`, which reads a method's ``FLAGS``).
"""

from collections.abc import Iterator, Mapping
from dataclasses import MISSING, fields
from typing import Any

from rearank.errors import RearankError
from rearank.methods.base import Method, Task
from rearank.methods.card import CARDS, RANK, cards
from rearank.methods.groupwise import Groupwise
from rearank.methods.listwise import Listwise
from rearank.methods.pointwise.method import Pointwise


class MethodClasses(Mapping[str, type]):
    """Method name -> the ``Method`` class of the ranking card of that name, in the order of :data:`CARDS`.

    Iterating loads the cards (one that fails to load is left out, with a warning naming it); a card that fails
    to load is still ``in`` it, so using it raises the one-line error naming its entry point."""

    def __getitem__(self, name: str) -> type:
        found = CARDS[name]
        if found.kind != RANK or found.method is None:
            raise KeyError(name)
        return found.method

    def __iter__(self) -> Iterator[str]:
        return iter([c.name for c in cards(RANK) if c.method is not None])

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, name: object) -> bool:
        if name not in CARDS:
            return False
        try:
            self[name]
        except KeyError:
            return False
        except RearankError:
            return True
        return True

    @property
    def builtin_names(self) -> list[str]:
        """rearank's own methods, without those of other packages' cards."""
        return [name for name in CARDS.builtin_names if name in self]

    def get_or_raise(self, name: str) -> type:
        """``METHODS[name]``, else a one-line :class:`RearankError` listing the methods there are."""
        if name not in self:
            raise RearankError(f"unknown method {name!r}; choose one of: {', '.join(self)}")
        return self[name]


#: Method name -> class; ``METHODS[name](**settings)`` builds one (settings are checked then).
METHODS = MethodClasses()


def method_options(method: str) -> list[str]:
    """The settings of ``method`` a user gives (by keyword to the face, as flags on the command line, recorded in a
    run's settings): its fields but the tokenizer, each under its field's name (``template``, ``top_k``, ...)."""
    return [f.name for f in fields(METHODS.get_or_raise(method)) if f.name != "tokenizer"]


def option_default(method: str, option: str) -> Any:
    """The default of ``option`` (a name of :func:`method_options`) of ``method``; None if it has none."""
    field = next(f for f in fields(METHODS.get_or_raise(method)) if f.name == option)
    return None if field.default is MISSING else field.default


__all__ = ["METHODS", "Groupwise", "Listwise", "Method", "Pointwise", "Task", "method_options", "option_default"]
