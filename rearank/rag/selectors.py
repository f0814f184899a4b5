"""Selectors: order each QA item's passages so that a reader reads the top-k. ``--selector NAME[:ARG]``.

Built in: ``none`` (the given order), ``oracle`` (supporting, then has-answer passages first), ``bm25`` (Lucene
BM25 of the question over the passages of the questions in one batch, each item keeping its own), ``listwise:MODEL``
(rearank's listwise driver through a backend), ``pointwise:MODEL`` (a pointwise scorer: a saved RRPO scorer,
a cross-encoder, or a causal LM scored by "yes") and ``barrag:MODEL`` (a BAR-RAG selector model: the passages it
chooses, in its order; :mod:`rearank.rag.barrag.select`). :data:`SELECTORS` maps a name to ``module:factory``; another
selector is one new module plus one line here (and one in :data:`SELECTOR_CARDS` if it runs a method's card). A
factory takes ``(arg, **options)`` and returns a :class:`Selector`.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any, Protocol

from rearank.errors import RearankError
from rearank.methods.card import Card, card
from rearank.types import Passage, QAItem


class Selector(Protocol):
    """Anything that ranks the passages of a batch of QA items (best first), in input order."""

    name: str

    def rank(self, items: Sequence[QAItem]) -> list[tuple[Passage, ...]]: ...


#: selector name -> "module:factory"
SELECTORS: dict[str, str] = {
    "none": "rearank.rag.selectors:GivenOrder",
    "oracle": "rearank.rag.selectors:OracleSelector",
    "bm25": "rearank.rag.selectors:BM25Selector",
    "listwise": "rearank.rag.selectors:listwise_selector",
    "pointwise": "rearank.rag.selectors:pointwise_selector",
    "barrag": "rearank.rag.barrag.select:barrag_selector",
}
#: selector name -> the method card it ranks or selects with (the rule selectors run none)
SELECTOR_CARDS: dict[str, str] = {"listwise": "listwise", "pointwise": "pointwise", "barrag": "barrag-selector"}


def selector_card(spec: str) -> Card | None:
    """The card of the method the selector ``spec`` (``NAME[:ARG]``) runs, None for a rule selector."""
    name = SELECTOR_CARDS.get(spec.partition(":")[0])
    return None if name is None else card(name)


def make_selector(spec: str, **options: Any) -> Selector:
    """Build the selector named by ``spec`` (``NAME`` or ``NAME:ARG``, e.g. ``pointwise:runs/rrpo/final``)."""
    name, _, arg = spec.partition(":")
    if name not in SELECTORS:
        raise RearankError(f"unknown selector {name!r}; choose one of {', '.join(SELECTORS)} (as NAME or NAME:ARG)")
    module, _, attr = SELECTORS[name].partition(":")
    factory = getattr(importlib.import_module(module), attr)
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
    """Rank through any reranker with ``rerank(requests, progress=...) -> results`` (listwise, pointwise)."""

    def __init__(self, name: str, reranker: Any) -> None:
        self.name, self.reranker = name, reranker

    def rank(self, items: Sequence[QAItem]) -> list[tuple[Passage, ...]]:
        results = self.reranker.rerank([item.to_request() for item in items], progress=False)
        out = []
        for item, result in zip(items, results):
            by_id = {p.pid: p for p in item.passages}
            out.append(tuple(by_id[c.docid] for c in result.candidates))
        return out


def pointwise_selector(arg: str | None, **options: Any) -> RequestSelector:
    """``pointwise:MODEL``: a saved scorer, hub id, local folder or ``embedded`` (options: kind, device,
    num_layers, max_passage_tokens, batch_size), on the engine through the scorer backend."""
    from rearank.backends.registry import make_backend
    from rearank.engine import Engine
    from rearank.methods import Pointwise

    # up to 256 passages a scorer call; the scorer runs them through the model batch_size at a time
    reranker = Engine(make_backend("scorer", arg, **options), Pointwise(), batch_size=256)
    return RequestSelector(f"pointwise:{arg or 'embedded'}", reranker)


def listwise_selector(
    arg: str | None,
    *,
    backend: str = "hf",
    template: str = "rearank",
    window: int = 20,
    step: int = 10,
    batch_size: int = 32,
    max_new_tokens: int = 256,
    **options: Any,
) -> RequestSelector:
    """``listwise:MODEL``: rearank's listwise method over the item's passages (options: backend, template, window,
    step, batch_size, max_new_tokens; the rest go to the backend)."""
    from rearank.backends.base import AUTO, SamplingSettings
    from rearank.backends.registry import make_backend
    from rearank.engine import Engine
    from rearank.methods import Listwise

    if backend == "oracle":
        raise RearankError("listwise selector: use --selector oracle for the oracle")
    method = Listwise(template=template, window=window, step=step)
    reranker = Engine(make_backend(backend, arg, **options), method, SamplingSettings(max_new_tokens=max_new_tokens),
                      batch_size=batch_size, concurrency=options.get("concurrency", AUTO))
    return RequestSelector(f"listwise:{arg or 'embedded'}", reranker)
