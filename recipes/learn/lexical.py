"""Lexical scores of a window's shown passages, for ``make train-learn``'s relevance task: query-term overlap (the
warm start's labels) and BM25 (a baseline), both on the words the prompt shows, nothing else.

Terms: lower-cased runs of letters and digits, minus a short English stopword list; no stemming.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence

STOPWORDS = frozenset((
    "a", "about", "an", "and", "are", "as", "at", "be", "by", "can", "define", "definition", "did", "do", "does",
    "for", "from", "how", "in", "is", "it", "of", "on", "or", "that", "the", "this", "to", "was", "what", "when",
    "where", "which", "who", "why", "will", "with"))
#: Anserini's BM25 defaults.
K1, B = 0.9, 0.4


def terms(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOPWORDS]


def overlap(query: str, passages: Sequence[str]) -> list[int]:
    """Per passage, how many distinct query terms it holds."""
    wanted = set(terms(query))
    return [len(wanted & set(terms(p))) for p in passages]


def unique_best(scores: Sequence[float]) -> int | None:
    """The 0-based position of the one highest score, None when it is shared (or every score is 0)."""
    top = max(scores)
    if top <= 0 or list(scores).count(top) > 1:
        return None
    return list(scores).index(top)


class BM25:
    """BM25 over a fixed set of passages (its document frequencies and mean length), scoring any passage's terms."""

    def __init__(self, passages: Iterable[str]) -> None:
        docs = [terms(p) for p in dict.fromkeys(passages)]  # each distinct passage once
        self.n = len(docs)
        self.df = Counter(t for d in docs for t in set(d))
        self.mean_length = sum(map(len, docs)) / max(self.n, 1)

    def scores(self, query: str, passages: Sequence[str]) -> list[float]:
        out = []
        for passage in passages:
            words = terms(passage)
            counts = Counter(words)
            norm = K1 * (1 - B + B * len(words) / max(self.mean_length, 1e-9))
            out.append(sum(math.log(1 + (self.n - self.df[t] + 0.5) / (self.df[t] + 0.5))
                           * counts[t] * (K1 + 1) / (counts[t] + norm) for t in set(terms(query)) if counts[t]))
        return out


def expected_top1(scores: Sequence[float], gold: int) -> float:
    """Top-1 of picking the highest score, ties broken at random: 1/|ties| when ``gold`` is among them."""
    top = max(scores)
    ties = [i for i, s in enumerate(scores) if s == top]
    return 1 / len(ties) if gold in ties else 0.0
