"""Paired significance tests on per-query (or per-question) scores: paired t-test, sign-flip randomization,
McNemar's exact test on paired right/wrong outcomes, and a randomization test that flips whole queries (items
clustered by query).

Shared by ``benchmark.compare`` and ``rearank compare`` (per-query nDCG of two runs or suites,
:func:`paired_comparison`) and ``rearank rag compare`` (per-question EM/F1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class Comparison:
    """Paired comparison of B against A on one dataset (scores are raw, not x 100)."""

    dataset: str
    queries: int
    mean_a: float
    mean_b: float
    t_p: float
    randomization_p: float
    wins: int
    ties: int
    losses: int

    @property
    def delta(self) -> float:
        return self.mean_b - self.mean_a


def paired_comparison(dataset: str, a: Mapping[str, float], b: Mapping[str, float], permutations: int = 10000,
                      seed: int = 0) -> Comparison | None:
    """B against A on the queries both scored (``qid -> score``); None when they share none."""
    qids = sorted(set(a) & set(b))
    if not qids:
        return None
    va, vb = np.array([a[q] for q in qids]), np.array([b[q] for q in qids])
    return Comparison(dataset, len(qids), float(va.mean()), float(vb.mean()), paired_t_p(va, vb),
                      randomization_p(va, vb, permutations, seed),
                      int(np.sum(vb > va)), int(np.sum(vb == va)), int(np.sum(vb < va)))


def paired_t_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided paired t-test p-value; 1.0 when every difference is 0, 0.0 when all equal another constant."""
    diff = b - a
    if np.all(diff == diff[0]):
        return 1.0 if diff[0] == 0 else 0.0
    return float(stats.ttest_rel(b, a).pvalue)


def randomization_p(a: np.ndarray, b: np.ndarray, permutations: int = 10000, seed: int = 0) -> float:
    """Two-sided paired randomization test: random sign flips of the per-query differences.

    p = (1 + #{|mean of flipped differences| >= |observed mean|}) / (1 + permutations).
    """
    diff = b - a
    observed = abs(diff.mean())
    rng = np.random.default_rng(seed)
    hits = 0
    for start in range(0, permutations, 1000):
        signs = rng.choice((-1.0, 1.0), size=(min(1000, permutations - start), diff.size))
        hits += int(np.sum(np.abs((signs * diff).mean(axis=1)) >= observed - 1e-12))
    return (1 + hits) / (1 + permutations)


def mcnemar_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided exact McNemar test on paired right/wrong outcomes (``a``, ``b``: booleans, one per item): the
    binomial probability of a split of the discordant pairs at least as uneven as observed; 1.0 when none differ."""
    a, b = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    only_a, only_b = int(np.sum(a & ~b)), int(np.sum(~a & b))
    discordant = only_a + only_b
    if discordant == 0:
        return 1.0
    return float(min(1.0, 2 * stats.binom.cdf(min(only_a, only_b), discordant, 0.5)))


def query_randomization_p(a: np.ndarray, b: np.ndarray, groups: Sequence[object], permutations: int = 100000,
                          seed: int = 0, exact_up_to: int = 16) -> float:
    """Two-sided paired randomization test that flips whole groups (queries): each group's paired differences
    ``b - a`` change sign together, so items of one query are not treated as independent.

    Statistic: the mean difference over all items. With at most ``exact_up_to`` groups every one of the ``2**G``
    sign patterns is enumerated and p = #{|flipped mean| >= |observed|} / 2**G (exact); otherwise ``permutations``
    random patterns give p = (1 + hits) / (1 + permutations). 1.0 when every difference is 0."""
    diff = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    if len(groups) != diff.size:
        raise ValueError(f"{len(groups)} group labels for {diff.size} paired items")
    order = {g: i for i, g in enumerate(dict.fromkeys(groups))}
    sums = np.zeros(len(order))
    np.add.at(sums, [order[g] for g in groups], diff)
    observed = abs(sums.sum())
    if observed == 0:
        return 1.0
    if len(sums) <= exact_up_to:
        signs = 1.0 - 2.0 * ((np.arange(2 ** len(sums))[:, None] >> np.arange(len(sums))) & 1)
        return float(np.mean(np.abs(signs @ sums) >= observed - 1e-9))
    rng = np.random.default_rng(seed)
    hits = 0
    for start in range(0, permutations, 1000):
        signs = rng.choice((-1.0, 1.0), size=(min(1000, permutations - start), sums.size))
        hits += int(np.sum(np.abs(signs @ sums) >= observed - 1e-9))
    return (1 + hits) / (1 + permutations)
