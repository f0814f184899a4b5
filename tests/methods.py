"""Test helpers for the ranking methods: a request of numbered passages and a one-token-per-character tokenizer."""

from __future__ import annotations

from collections.abc import Sequence

from rearank.types import Candidate, Query, Request


def request(n: int | None = None, text: str = "passage {i}", scores: Sequence[float] | None = None) -> Request:
    """Query ``q1`` over ``d0``, ``d1``, …: ``n`` of them scored 0, -1, … unless ``scores`` are given."""
    scores = scores if scores is not None else [float(-i) for i in range(n or 0)]
    return Request(Query("q1", "what?"), tuple(Candidate(f"d{i}", s, text.format(i=i)) for i, s in enumerate(scores)))


class CharTokenizer:
    """One token per character (what truncation needs from a tokenizer); ``seen`` keeps the texts it tokenized."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, texts: list[str], add_special_tokens: bool = False) -> dict[str, list[list[int]]]:
        self.seen.extend(texts)
        return {"input_ids": [[ord(c) for c in t] for t in texts]}

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return "".join(map(chr, ids))
