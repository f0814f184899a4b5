"""ARENA training rows (``rearank synth --method arena``): the item's paragraphs in their given order (with
``--corpus``: the retrieval order), 10 (MuSiQue: 20); ground truth ``{"answers", "supporting": [1-based ids of
the shown supporting paragraphs]}``. A question with no supporting paragraph among those shown is skipped."""

from __future__ import annotations

from typing import Any

from rearank.methods.arena.prompt import arena_messages
from rearank.methods.arena.reading import arena_passages
from rearank.methods.card import QARow


def arena_row(row: QARow) -> tuple[list, dict[str, Any], list[str]] | str:
    item = row.item
    shown = list(arena_passages(item))
    supporting = [i for i, p in enumerate(shown, 1) if p.pid in item.supporting]
    if not supporting:
        return "no_supporting"
    truth = {"answers": list(item.answers), "supporting": supporting}
    return arena_messages(item.question, shown, **row.cut), truth, [p.pid for p in shown]
