"""Rank-biased overlap (Webber, Moffat and Zobel, 2010) of two rankings of the same length, and its p = 1 case,
average overlap (the ReasonRank reward's RBO: the ``rbo`` package's ``RankingSimilarity(a, b).rbo()`` default)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from functools import lru_cache
from operator import mul


@lru_cache(maxsize=64)
def _weights(p: float, depth: int) -> tuple[tuple[float, ...], float]:
    """Weights ``w_d = (1 - p)/p * p^d / d`` for d = 1..depth, and ``sum_d 2d * w_d``."""
    weights = tuple((1.0 - p) * p ** (d - 1) / d for d in range(1, depth + 1))
    return weights, sum(2 * d * w for d, w in enumerate(weights, start=1))


def rbo(ranking: Sequence[Hashable], reference: Sequence[Hashable], p: float = 0.9) -> float:
    """Extrapolated RBO of two equally long rankings, each of distinct items, in [0, 1] (1 when identical).

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
    union = _union_sizes(ranking, reference)
    weights, full = _weights(p, depth)
    return full - sum(map(mul, union, weights)) + (2 * depth - union[-1]) / depth * p**depth


def _union_sizes(ranking: Sequence[Hashable], reference: Sequence[Hashable]) -> list[int]:
    """Sizes of the unions of the two top-d prefixes, d = 1..k: the overlap is ``X_d = 2d - union_d``."""
    seen: set[Hashable] = set()
    add = seen.add
    union = []
    for a, b in zip(ranking, reference):
        add(a)
        add(b)
        union.append(len(seen))
    return union


def average_overlap(ranking: Sequence[Hashable], reference: Sequence[Hashable]) -> float:
    """Average overlap ``(1/k) sum_{d=1..k} X_d / d`` over the depth ``k`` of the shorter ranking (1 when both are
    empty, 0 when one is): RBO's p = 1 case, unweighted and not extrapolated."""
    depth = min(len(ranking), len(reference))
    if depth == 0:
        return float(len(ranking) == len(reference))
    union = _union_sizes(ranking[:depth], reference[:depth])
    return sum((2 * d - u) / d for d, u in enumerate(union, start=1)) / depth
