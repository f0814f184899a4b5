"""The synthesis filters' edges by hand: the cutoff of both nDCG figures, zero grades in the pool, a pool whose
ideal DCG is 1 or 0, a set exactly at the ideal-nDCG threshold."""

from __future__ import annotations

import math

import pytest

from data_synthesis.filters import FilterConfig, SetScores, query_ideal_dcg, rejection, score_set


def test_the_pool_ideal_counts_ten_ranks_and_no_zero_or_negative_grade():
    eleven = {f"d{i}": 1 for i in range(11)}
    assert query_ideal_dcg(eleven) == pytest.approx(sum(1 / math.log2(i + 1) for i in range(1, 11)), abs=1e-12)
    assert query_ideal_dcg(eleven, k=2) == pytest.approx(1 + 1 / math.log2(3), abs=1e-12)
    assert query_ideal_dcg({"a": 1, "b": 0, "c": -2}) == 1.0


def test_both_figures_use_the_cutoff_given():
    # labels [0, 1, 1, 1] at k = 2: the set's ideal DCG@2 = 1 + 1/log2(3) (not + 1/2 at rank 3), its DCG@2 = 1/log2(3)
    third = 1 / math.log2(3)
    scores = score_set([0, 1, 1, 1], pool_ideal_dcg=2.0, k=2)
    assert scores == SetScores(pytest.approx(third / (1 + third), abs=1e-12),
                               pytest.approx((1 + third) / 2.0, abs=1e-12), 3)


def test_a_pool_ideal_of_one_divides_and_of_zero_gives_zero():
    assert score_set([0, 1], 1.0).pool_ndcg == 1.0  # one judgment of grade 1 in the pool: IDCG = 1
    assert score_set([0, 1], 0.0).pool_ndcg == 0.0


def test_a_set_exactly_at_the_ideal_threshold_is_kept():
    scores = SetScores(set_ndcg=1.0, pool_ndcg=0.25, n_relevant=1)
    assert rejection(scores, FilterConfig(ideal_ndcg=True, min_ideal_ndcg=0.25)) is None
    assert rejection(scores, FilterConfig(ideal_ndcg=True, min_ideal_ndcg=0.2500001)) == "ideal_ndcg"
