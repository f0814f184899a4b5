"""Seeded draws: K distinct sets of n candidates per query, their presented order, and the query split.

Every random choice comes from a NumPy ``Generator(PCG64)`` seeded with a SHA-256 hash of the user's seed,
the query id and the purpose of the draw (``sets``, ``order``, ``split``). Python's ``hash()`` is never used
(it is salted per process), so the result does not depend on the machine, the process, or the order in which
queries are read; it depends only on (seed, qid, NumPy version), since NumPy may change a Generator's method
streams between releases.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

#: How ``n`` drawn candidates are presented: in first-stage (BM25) order, or in a random order.
ORDERS = ("bm25", "shuffle")


def stable_seed(seed: int, qid: str, purpose: str) -> int:
    """A 256-bit integer derived from ``(seed, qid, purpose)`` by SHA-256 (same on every machine and process)."""
    digest = hashlib.sha256(f"rearank-synth\x1f{seed}\x1f{purpose}\x1f{qid}".encode()).digest()
    return int.from_bytes(digest, "big")


def query_rng(seed: int, qid: str, purpose: str) -> np.random.Generator:
    """The Generator(PCG64) of one query and one purpose."""
    return np.random.Generator(np.random.PCG64(stable_seed(seed, qid, purpose)))


@dataclass(frozen=True)
class QuerySets:
    """The sets drawn for one query.

    ``sets``: candidate positions (0-based ranks in the first-stage list) in presented order, one tuple per set,
    in draw order. ``duplicates``: draws rejected because the same set of positions was already drawn.
    ``possible``: how many distinct sets exist (C(n_candidates, set_size)).
    """

    sets: tuple[tuple[int, ...], ...]
    duplicates: int
    possible: int


def draw_sets(
    qid: str,
    n_candidates: int,
    set_size: int,
    samples: int,
    seed: int,
    order: str = "bm25",
    attempts_per_set: int = 10,
) -> QuerySets:
    """Draw up to ``samples`` distinct sets of ``set_size`` positions out of ``range(n_candidates)``.

    Each set is drawn uniformly without replacement. A set equal (as a set) to an earlier one is rejected and
    counted; drawing stops after ``samples`` distinct sets, after all ``C(n_candidates, set_size)`` sets were
    found, or after ``attempts_per_set * samples`` draws, whichever comes first. With ``order="bm25"`` a set's
    positions are sorted (first-stage order); with ``"shuffle"`` they are permuted by a separate stream, so both
    orders draw the same sets.
    """
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    if not 1 <= set_size <= n_candidates:
        raise ValueError(f"set_size {set_size} must be between 1 and the number of candidates ({n_candidates})")
    possible = math.comb(n_candidates, set_size)
    target = min(samples, possible)
    rng = query_rng(seed, qid, "sets")
    seen: set[tuple[int, ...]] = set()
    drawn: list[tuple[int, ...]] = []
    duplicates = 0
    for _ in range(attempts_per_set * samples):
        if len(drawn) >= target:
            break
        positions = tuple(sorted(rng.choice(n_candidates, size=set_size, replace=False).tolist()))
        if positions in seen:
            duplicates += 1
            continue
        seen.add(positions)
        drawn.append(positions)
    if order == "shuffle":
        order_rng = query_rng(seed, qid, "order")
        drawn = [tuple(positions[i] for i in order_rng.permutation(set_size).tolist()) for positions in drawn]
    return QuerySets(tuple(drawn), duplicates, possible)


def split_queries(qids: Iterable[str], val_fraction: float, seed: int) -> set[str]:
    """The validation queries: ``round(val_fraction * N)`` of the ``N`` qids, chosen by a seeded hash.

    Queries are ranked by :func:`stable_seed` of ``(seed, qid, "split")``, so the choice does not depend on the
    order of ``qids``. At least one query goes to validation when ``val_fraction > 0`` and there are two or more
    queries, and at least one stays in training.
    """
    unique = sorted(set(qids))
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    if val_fraction == 0 or len(unique) < 2:
        return set()
    n_val = min(max(1, round(val_fraction * len(unique))), len(unique) - 1)
    ranked = sorted(unique, key=lambda qid: stable_seed(seed, qid, "split"))
    return set(ranked[:n_val])
