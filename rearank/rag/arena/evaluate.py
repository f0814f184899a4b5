"""An ARENA generator at inference: prompt an item, parse the output, score answer and evidence (for ``rag eval``)."""

from __future__ import annotations

from rearank.measures.answers import exact_match, hit, token_f1
from rearank.methods.arena.parser import parse_arena
from rearank.methods.arena.prompt import arena_messages, n_references
from rearank.methods.arena.reward import relevance_accuracy
from rearank.types import Message, Passage, QAItem


def arena_passages(item: QAItem) -> tuple[Passage, ...]:
    """The references shown for ``item``: its first 10 paragraphs (MuSiQue: 20), in the given order."""
    return item.passages[: n_references(item.source)]


def arena_prompt(item: QAItem) -> list[Message]:
    """The ARENA chat for ``item`` (the renderer synthesis uses)."""
    return arena_messages(item.question, arena_passages(item))


def score_arena(item: QAItem, generation: str, style: str = "arena") -> dict[str, object]:
    """Answer EM/F1/Hit (``style`` normalisation), format, and relevance-id accuracy against the supporting ids.

    Returns the parsed answer (``""`` when absent), the cited passage ids (``pids``) and numeric scores.
    """
    shown = arena_passages(item)
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
