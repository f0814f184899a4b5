"""ARENA completions of known kinds for the recipe checks, with the score the reward's definition gives them."""

from __future__ import annotations

from rearank.methods.arena.parser import format_arena


def arena(truth: dict) -> dict[str, str]:
    gold, first = truth["answers"][0], truth["supporting"][:1]
    return {"gold": format_arena(truth["supporting"], "The cited references give the answer.", gold),
            "partial": format_arena(first, "Only one reference.", "no idea"),
            "leading_word": "Answer: " + format_arena(truth["supporting"], "x", gold),
            "garbage": "I cannot tell."}


def arena_expected(kind: str, truth: dict) -> float | None:
    # gold: 1 + 1 + 1 + 10; partial: format 1 + relevance 0.5 (one of >= 2 gold ids); leading word: format 0,
    # accuracy 1, relevance 1 -> 2; garbage: 0
    partial = 1.5 if len(truth["supporting"]) > 1 else 2.0
    return {"gold": 13.0, "partial": partial, "leading_word": 2.0, "garbage": 0.0}[kind]
