"""Selectors: order each QA item's passages so that a reader reads the top-k. ``--selector NAME[:ARG]``.

Built in: ``none`` (the given order), ``oracle`` (supporting, then has-answer passages first), ``bm25`` (Lucene
BM25 of the question over the passages of the questions in one batch, each item keeping its own) and ``barrag:MODEL``
(a BAR-RAG selector model: the passages it chooses, in its order; :mod:`rearank.rag.barrag.select`); and every
ranking method of :data:`rearank.methods.METHODS`, a plugin's too, as ``METHOD:MODEL`` (``listwise:MODEL``,
``pointwise:MODEL``: a saved RRPO scorer, a cross-encoder, or a causal LM scored by "yes" on the method's default
backend, the scorer; :func:`method_selector`). :data:`SELECTORS` maps the other names to ``module:factory``; another
selector is one new module plus one line here (and one in :data:`SELECTOR_CARDS` if it runs a method's card). A
factory takes ``(arg, **options)`` and returns a :class:`Selector`.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from functools import partial
from typing import Any, Protocol

from rearank.errors import RearankError
from rearank.methods import METHODS
from rearank.methods.card import CARDS, Card, card
from rearank.types import Passage, QAItem

#: The answer budget of a ranking method's selector when its options name none: a ranking, not an essay.
SELECTOR_MAX_NEW_TOKENS = 256


class Selector(Protocol):
    """Anything that ranks the passages of a batch of QA items (best first), in input order."""

    name: str

    def rank(self, items: Sequence[QAItem]) -> list[tuple[Passage, ...]]: ...


#: selector name -> "module:factory", beside the ranking methods (:func:`selector_names`)
SELECTORS: dict[str, str] = {
    "none": "rearank.rag.selectors:GivenOrder",
    "oracle": "rearank.rag.selectors:OracleSelector",
    "bm25": "rearank.rag.selectors:BM25Selector",
    "barrag": "rearank.rag.barrag.select:barrag_selector",
}
#: selector name of :data:`SELECTORS` -> the method card it selects with (a ranking method's is the card of its name)
SELECTOR_CARDS: dict[str, str] = {"barrag": "barrag-selector"}


def selector_names() -> list[str]:
    """Every selector name: those of :data:`SELECTORS`, then the ranking methods (entry points included)."""
    return [*SELECTORS, *(name for name in METHODS if name not in SELECTORS)]


def selector_card(spec: str) -> Card | None:
    """The card of the method the selector ``spec`` (``NAME[:ARG]``) runs, None for a rule selector (or a ranking
    method without a card)."""
    name = spec.partition(":")[0]
    if name in SELECTOR_CARDS:
        return card(SELECTOR_CARDS[name])
    return card(name) if name not in SELECTORS and name in METHODS and name in CARDS else None


def make_selector(spec: str, **options: Any) -> Selector:
    """Build the selector named by ``spec`` (``NAME`` or ``NAME:ARG``, e.g. ``pointwise:runs/rrpo/final``)."""
    name, _, arg = spec.partition(":")
    if name in SELECTORS:
        module, _, attr = SELECTORS[name].partition(":")
        factory = getattr(importlib.import_module(module), attr)
    elif name in METHODS:
        factory = partial(method_selector, name)
    else:
        raise RearankError(f"unknown selector {name!r}; choose one of {', '.join(selector_names())} (as NAME or "
                           "NAME:ARG)")
    try:
        return factory(arg or None, **options)
    except TypeError as err:
        raise RearankError(f"bad options for the {name} selector: {err}") from None


class _Plain:
    """A selector that takes no ``:ARG``."""

    name = ""

    def __init__(self, arg: str | None = None) -> None:
        if arg:
            raise RearankError(f"the {self.name} selector takes no argument (got {arg!r})")


class GivenOrder(_Plain):
    """The passages in the order the item gives them."""

    name = "none"

    def rank(self, items: Sequence[QAItem]) -> list[tuple[Passage, ...]]:
        return [item.passages for item in items]


class OracleSelector(_Plain):
    """Supporting passages first, then has-answer ones, then the rest, each group in the given order."""

    name = "oracle"

    def rank(self, items: Sequence[QAItem]) -> list[tuple[Passage, ...]]:
        def group(item: QAItem, p: Passage) -> int:
            return 0 if p.pid in item.supporting else 1 if p.has_answer else 2

        return [tuple(sorted(item.passages, key=lambda p: group(item, p))) for item in items]


class BM25Selector(_Plain):
    """Rank each item's passages by Lucene BM25 (rearank.data.bm25: Anserini, k1 0.9, b 0.4) of its question.

    The passages of a batch of items form one temporary index, so term statistics come from that pool; every item
    keeps only its own passages, in BM25 order, then those with no matching term in the given order.
    """

    name = "bm25"

    def rank(self, items: Sequence[QAItem]) -> list[tuple[Passage, ...]]:
        from rearank.rag.retrieval import rank_own_passages

        return [tuple(p for p, _ in ranked) for ranked in rank_own_passages(items)]


class RequestSelector:
    """Rank through any reranker with ``rerank(requests, progress=...) -> results`` (a ranking method's engine)."""

    def __init__(self, name: str, reranker: Any) -> None:
        self.name, self.reranker = name, reranker

    def rank(self, items: Sequence[QAItem]) -> list[tuple[Passage, ...]]:
        results = self.reranker.rerank([item.to_request() for item in items], progress=False)
        out = []
        for item, result in zip(items, results):
            by_id = {p.pid: p for p in item.passages}
            out.append(tuple(by_id[c.docid] for c in result.candidates))
        return out


def method_selector(method: str, arg: str | None, **options: Any) -> RequestSelector:
    """``METHOD:MODEL``: the ranking method ``method`` over each item's passages, its run built from ``options`` as
    every face builds one (:meth:`rearank.run.config.RunConfig.build`: ``backend``, default the method's; the
    method's options, sampling, the engine's; the rest go to the backend), with :data:`SELECTOR_MAX_NEW_TOKENS`
    unless ``max_new_tokens`` is given."""
    from rearank.run.config import RunConfig

    config = RunConfig.build(method, options.pop("backend", None), arg,
                             **{"max_new_tokens": SELECTOR_MAX_NEW_TOKENS, **options})
    if config.declared("NEEDS_QRELS"):  # QA items come with no qrels
        raise RearankError(f"{method} selector: use --selector oracle for the {config.backend}")
    return RequestSelector(f"{method}:{arg or 'embedded'}", config.engine(config.make_backend()))
