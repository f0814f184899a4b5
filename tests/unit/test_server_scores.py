"""Scores and fusion of the rerank server: properties over random orders and first-stage scores."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from rearank.api import rank_scores
from rearank.server.app import fused_order


@st.composite
def order_and_scores(draw):
    n = draw(st.integers(1, 30))
    order = draw(st.permutations(list(range(n))))
    # Whole scores: differences below float resolution after min-max scaling would be ties, not an order.
    scores = [float(x) for x in draw(st.lists(st.integers(-100, 100), min_size=n, max_size=n))]
    return order, scores


@given(st.integers(1, 500))
def test_rank_scores_strictly_decrease_in_the_unit_interval(n):
    scores = rank_scores(n)
    assert len(scores) == n and scores[0] == 1.0 and 0 < scores[-1]
    assert all(a > b for a, b in pairwise(scores))


@settings(deadline=None)
@given(order_and_scores(), st.floats(0, 1))
def test_fusion_is_a_permutation_between_its_two_extremes(case, alpha):
    order, first_stage = case
    fused = fused_order(order, first_stage, alpha)
    assert sorted(fused) == sorted(order)
    assert fused_order(order, first_stage, 1.0) == order  # rank score alone: the reranked order
    by_score = fused_order(order, first_stage, 0.0)  # first stage alone, ties in reranked order
    rank = {index: r for r, index in enumerate(order)}
    assert by_score == sorted(order, key=lambda i: (-first_stage[i], rank[i]))
