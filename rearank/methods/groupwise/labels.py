"""GroupRank's teacher labels (paper §IV-A): the hybrid first stage (Eq. 5) and the fused label S_gt (Eq. 6).

Pure arithmetic on scores and ranks; the teachers are called by ``data_synthesis.grouprank_labels``.
``norm`` is min-max over one query's values; a query whose values are all equal normalises to 0 (ours: the
paper leaves that case open, and equal values carry no order).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

#: The pointwise teacher's verdict line, ``Relevance score: X.`` (the paper's pointwise annotation format).
_POINT_SCORE = re.compile(r"relevance\s+score\s*:\s*(-?\d+(?:\.\d+)?)", re.IGNORECASE)


def minmax(values: Sequence[float]) -> list[float]:
    """``(v - min) / (max - min)`` for each value; all 0 when every value is equal (or none is given)."""
    if not values:
        return []
    low, high = min(values), max(values)
    if high <= low:
        return [0.0] * len(values)
    return [(v - low) / (high - low) for v in values]


def hybrid_scores(first: Mapping[str, float], second: Mapping[str, float], weight: float = 0.5) -> dict[str, float]:
    """Eq. 5: ``weight * norm(first) + (1 - weight) * norm(second)`` per document of either run.

    Each run is normalised over its own documents; a document absent from one run takes 0 there (the bottom
    of that run's normalised range). Keys keep ``first``'s order, then ``second``'s new ones.
    """
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"fusion weight must be in [0, 1]; got {weight!r}")
    a = dict(zip(first, minmax(list(first.values()))))
    b = dict(zip(second, minmax(list(second.values()))))
    return {doc: weight * a.get(doc, 0.0) + (1.0 - weight) * b.get(doc, 0.0) for doc in {**first, **second}}


def top_hybrid(first: Mapping[str, float], second: Mapping[str, float], weight: float, k: int) -> list[tuple[str, float]]:
    """The ``k`` best documents by :func:`hybrid_scores`, best first; ties keep the key order."""
    fused = hybrid_scores(first, second, weight)
    items = list(fused.items())
    order = sorted(range(len(items)), key=lambda i: -items[i][1])
    return [items[i] for i in order[:k]]


def parse_point_score(text: object) -> float | None:
    """The last ``Relevance score: X`` of a pointwise teacher's answer, X in [0, 10]; None when absent or off-scale."""
    if not isinstance(text, str):
        return None
    found = _POINT_SCORE.findall(text)
    if not found:
        return None
    value = float(found[-1])
    return value if 0.0 <= value <= 10.0 else None


def point_rationale(text: str) -> str:
    """A pointwise teacher's answer without its score line: the reasoning it gave (may be empty)."""
    return _POINT_SCORE.sub("", text).strip().rstrip(".").strip()


def fused_labels(point: Sequence[float], ranks: Sequence[int], alpha: float = 0.5) -> list[float]:
    """Eq. 6: ``alpha * norm(S_point) + (1 - alpha) * norm(-log r)`` per document; ``ranks`` are 1-based."""
    if len(point) != len(ranks):
        raise ValueError(f"{len(point)} pointwise scores but {len(ranks)} listwise ranks")
    if any(r < 1 for r in ranks):
        raise ValueError("listwise ranks are 1-based")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1]; got {alpha!r}")
    s_point = minmax(list(point))
    s_list = minmax([-math.log(r) for r in ranks])
    return [alpha * p + (1.0 - alpha) * q for p, q in zip(s_point, s_list)]
