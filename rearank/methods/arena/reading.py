"""An ARENA generator read in ``rag eval``: the references it is shown (the first 10 of the selector's order,
MuSiQue 20, read once) and the measures of its output -- answer EM/F1/Hit, format, and relevance-id accuracy
against the supporting ids."""

from __future__ import annotations

from collections.abc import Sequence

from rearank.measures.answers import exact_match, hit, token_f1
from rearank.methods.arena.parser import parse_arena
from rearank.methods.arena.prompt import arena_messages, n_references
from rearank.methods.arena.reward import STYLE, relevance_accuracy
from rearank.types import Message, Passage, QAItem

#: The measures of one reading, in table order.
MEASURES = ("em", "f1", "hit", "format_ok", "relevance_exact", "relevance_overlap", "relevance_precision",
            "relevance_recall")


def arena_passages(item: QAItem) -> tuple[Passage, ...]:
    """The references shown for ``item``: its first 10 paragraphs (MuSiQue: 20), in the given order."""
    return item.passages[: n_references(item.source)]


def arena_prompt(item: QAItem) -> list[Message]:
    """The ARENA chat for ``item`` (the renderer synthesis uses)."""
    return arena_messages(item.question, arena_passages(item))


def score_arena(item: QAItem, shown: Sequence[Passage], generation: str, style: str = STYLE) -> dict[str, object]:
    """Answer EM/F1/Hit (``style`` normalisation), format, and relevance-id accuracy against the supporting ids
    among ``shown``. Returns the parsed answer (``""`` when absent), the cited passage ids (``pids``) and numeric
    scores."""
    parsed = parse_arena(generation)
    answer = parsed.answer or ""
    gold_ids = [i for i, p in enumerate(shown, 1) if p.pid in item.supporting]
    cited = [shown[i - 1].pid for i in parsed.relevance or () if 1 <= i <= len(shown)]
    return {
        "answer": answer,
        "pids": cited,
        "em": exact_match(answer, item.answers, style),
        "f1": token_f1(answer, item.answers, style),
        "hit": hit(answer, item.answers, style),
        "format_ok": float(parsed.format_ok),
        **relevance_accuracy(generation, gold_ids),
    }
