"""Rank-biased overlap (Webber, Moffat and Zobel, 2010) of two rankings of the same items."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from functools import lru_cache


@lru_cache(maxsize=64)
def _weights(p: float, depth: int) -> tuple[float, ...]:
    """``(1 - p) / p * p**d / d`` for d = 1..depth: the weight of the overlap count at each depth."""
    return tuple((1.0 - p) * p ** (d - 1) / d for d in range(1, depth + 1))


def rbo(ranking: Sequence[Hashable], reference: Sequence[Hashable], p: float = 0.9) -> float:
    """Extrapolated RBO of two equally long rankings of distinct items, in [0, 1] (1 when identical).

    ``RBO_ext = (X_k / k) p^k + (1 - p)/p * sum_{d=1..k} (X_d / d) p^d`` where ``X_d`` is the size of the
    overlap of the two top-d prefixes and ``k`` the list length. ``p`` (persistence, 0 < p < 1) sets how
    top-heavy it is: the first d ranks carry ``1 - p^d`` of the weight.
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"RBO persistence p must be in (0, 1), got {p}")
    depth = len(ranking)
    if depth != len(reference):
        raise ValueError(f"RBO needs equally long rankings, got {depth} and {len(reference)}")
    if depth == 0:
        return 1.0
    seen_a: set[Hashable] = set()
    seen_b: set[Hashable] = set()
    overlap = 0
    total = 0.0
    for a, b, weight in zip(ranking, reference, _weights(p, depth)):
        if a == b:
            overlap += 1
        else:
            overlap += (a in seen_b) + (b in seen_a)
        seen_a.add(a)
        seen_b.add(b)
        total += overlap * weight
    return total + overlap / depth * p**depth
