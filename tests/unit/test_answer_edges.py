"""Edges of the listwise answer parser that mutation testing found untested (docs/testing.md)."""

from __future__ import annotations

import pytest

from rearank.methods.listwise.answer import apply_permutation, ideal_answer, parse_answer
from rearank.methods.reasoning import answer_span


def test_an_unclosed_think_has_an_empty_truncated_answer():
    assert answer_span("<think>[1] > [2]") == ("", True)
    assert answer_span("<think>a</think><think>[2]") == ("", True)
    assert answer_span("<think>a</think> [2] > [1]") == (" [2] > [1]", False)


def test_tags_in_order_is_a_subsequence_check():
    assert parse_answer("<think>a</think><answer>[1]</answer><think>more</think>", 1).has_tags
    assert not parse_answer("xxxxxxxxxx<answer>[1]</answer><think>b</think>", 1).has_tags  # answer first


def test_counts_of_out_of_range_and_repeated_ids():
    p = parse_answer("<answer>[9] > [1] > [8] > [1] > [1] > [2]</answer>", 2)
    assert (p.n_out_of_range, p.n_duplicates, p.n_missing, p.n_ids) == (2, 2, 0, 6)


def test_wrong_format_needs_a_passage_to_rank():
    assert parse_answer("no ids here", 1).status == "wrong_format"
    assert parse_answer("<answer></answer>", 0).status == "ok"  # nothing to rank: nothing is wrong
    assert parse_answer("<answer></answer>", 0).permutation == ()


def test_strict_format_needs_an_answer_block():
    assert not parse_answer("[1] > [2]", 2).strict_format
    assert not parse_answer("<answer>[1] > [3]</answer>", 2).strict_format  # out of range, no repeat
    assert parse_answer("<answer> [1] > [2] </answer>", 2).strict_format


def test_apply_permutation_names_the_bad_permutation():
    with pytest.raises(ValueError, match=r"^not a permutation of range\(2\): \[0, 0\]$"):
        apply_permutation(["a", "b"], [0, 0])
    with pytest.raises(ValueError) as err:
        apply_permutation(list(range(31)), [0] * 31)
    assert str(err.value) == f"not a permutation of range(31): {[0] * 30}"  # at most 30 ids shown


def test_ideal_answer_orders_by_grade_and_keeps_ties_in_presented_order():
    assert ideal_answer([0, 2, 1]) == ("<think>Relevance judgments: [1]=0, [2]=2, [3]=1.</think>\n"
                                       "<answer>[2] > [3] > [1]</answer>")
    assert ideal_answer([1, 3, 1, 3]).endswith("<answer>[2] > [4] > [1] > [3]</answer>")
    assert parse_answer(ideal_answer([0, 2, 1]), 3).permutation == (1, 2, 0)
