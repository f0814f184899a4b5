"""rearank.measures.ndcg against hand-computed values and against trec_eval (pytrec_eval) on the same labels."""

from __future__ import annotations

import math

import pytest
import pytrec_eval
from hypothesis import given, settings
from hypothesis import strategies as st

from rearank.measures.ndcg import dcg_at_k, ideal_dcg_at_k, ndcg_at_k


def test_dcg_by_hand():
    # gains 3, 0, 2 at ranks 1..3: 3/log2(2) + 0 + 2/log2(4) = 3 + 1
    assert dcg_at_k([3, 0, 2]) == pytest.approx(4.0)
    assert dcg_at_k([0, 1]) == pytest.approx(1 / math.log2(3))
    assert dcg_at_k([]) == 0.0


def test_cutoff_and_negative_labels():
    labels = [0, 0, 1, 2]
    assert dcg_at_k(labels, k=2) == 0.0
    assert dcg_at_k(labels, k=3) == pytest.approx(1 / math.log2(4))
    assert dcg_at_k(labels, k=4) == pytest.approx(0.5 + 2 / math.log2(5))
    assert dcg_at_k([-2, 1], k=2) == pytest.approx(1 / math.log2(3))  # a negative grade gains nothing
    assert dcg_at_k([1] * 12) == pytest.approx(sum(1 / math.log2(i + 2) for i in range(10)))  # default k = 10


def test_ideal_and_ndcg():
    assert ideal_dcg_at_k([0, 2, 1]) == pytest.approx(2 + 1 / math.log2(3))
    assert ideal_dcg_at_k([0, 2, 1], k=1) == 2.0
    assert ndcg_at_k([2, 1, 0]) == 1.0
    assert ndcg_at_k([0, 1, 2]) == pytest.approx((1 / math.log2(3) + 1) / (2 + 1 / math.log2(3)))
    assert ndcg_at_k([0, 0]) == 0.0 and ndcg_at_k([-1, 0]) == 0.0  # no positive label: 0, not a division by 0
    # a judged pool larger than the list: normalised by the given ideal
    assert ndcg_at_k([1, 0], ideal=4.0) == 0.25
    assert ndcg_at_k([1], ideal=0.0) == 0.0
    assert ndcg_at_k([0, 3], k=1) == 0.0


def test_ranks_past_the_discount_table():
    """Discounts are tabled for the first 1000 ranks and computed beyond: both give 1 / log2(rank + 1)."""
    for rank in (999, 1000, 1001, 1500):  # 1-based
        labels = [0] * (rank - 1) + [1]
        assert dcg_at_k(labels, k=2000) == pytest.approx(1 / math.log2(rank + 1)), rank


@settings(max_examples=200)
@given(st.lists(st.integers(-1, 3), min_size=1, max_size=30), st.integers(1, 30))
def test_agrees_with_trec_eval(labels, k):
    qrels = {"q": {f"d{i}": rel for i, rel in enumerate(labels)}}
    run = {"q": {f"d{i}": float(len(labels) - i) for i in range(len(labels))}}
    measure = f"ndcg_cut.{k}"
    expected = pytrec_eval.RelevanceEvaluator(qrels, {measure}).evaluate(run)["q"][f"ndcg_cut_{k}"]
    assert ndcg_at_k(labels, k) == pytest.approx(expected, abs=1e-9)


def test_the_default_cutoff_is_10():
    labels = [0] * 10 + [1]
    assert dcg_at_k(labels) == 0.0 and ndcg_at_k(labels) == 0.0
    assert ideal_dcg_at_k([1] * 11) == pytest.approx(sum(1 / math.log2(i + 2) for i in range(10)))
