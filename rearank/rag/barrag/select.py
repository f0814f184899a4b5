"""A BAR-RAG selector at inference: its completion -> the passages it chose (for ``rearank rag eval``)."""

from __future__ import annotations

from rearank.rag.barrag.parser import parse_selection
from rearank.rag.barrag.prompt import SELECTOR_CANDIDATES, selector_messages
from rearank.rag.types import QAItem


def selector_candidates(item: QAItem, n: int = SELECTOR_CANDIDATES):
    """The passages a selector is shown: the item's first ``n`` (callers rerank/retrieve first if they wish)."""
    return item.passages[:n]


def selection_prompt(item: QAItem, n: int = SELECTOR_CANDIDATES) -> list[dict]:
    """The selector's chat for ``item`` (the same renderer synthesis uses)."""
    return selector_messages(item.question, selector_candidates(item, n))


def select(item: QAItem, generation: str, n: int = SELECTOR_CANDIDATES, fallback_k: int = 0) -> list[str]:
    """Passage ids chosen by a selector completion, in its order (repeats and out-of-range ids dropped).

    An unparseable completion selects nothing, or the first ``fallback_k`` candidates if asked.
    """
    shown = selector_candidates(item, n)
    parsed = parse_selection(generation, len(shown))
    if not parsed.ids:
        return [p.pid for p in shown[:fallback_k]]
    return [shown[i - 1].pid for i in parsed.ids]
