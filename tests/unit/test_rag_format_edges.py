"""Edges of the ARENA and BAR-RAG parsers and the ARENA reward that mutation testing found untested.

Ground truths are given as dicts here, which the reward builds on every call (a JSON string is decoded once per
distinct string and cached).
"""

import math

import pytest

from rearank.methods.arena.parser import ArenaOutput, parse_arena, parse_relevance
from rearank.methods.arena.reward import compute_score, relevance_accuracy
from rearank.methods.barrag.parser import Generation, Selection, format_selection, parse_generation, parse_selection

WELL_FORMED = "<relevance>[1, 5]</relevance><analysis>a</analysis><answer>{}</answer>"


@pytest.mark.parametrize("text", ["3", "{}", '{"1": 5}', "null", '"[1]"'])
def test_arena_relevance_that_is_not_a_json_list_is_none(text):
    assert parse_relevance(text) is None


@pytest.mark.parametrize("text", [None, 7, b"<answer>x</answer>"])
def test_arena_non_string_output_fails_the_format(text):
    assert parse_arena(text) == ArenaOutput(False, None, None)


def test_arena_relevance_and_answer_read_when_the_format_fails():
    # sections out of order: format 0, but the first relevance block and the first answer are still read
    assert parse_arena("<answer> Paris </answer><relevance>[2, 1, 2]</relevance><answer>Rome</answer>") == \
        ArenaOutput(False, (1, 2), "Paris")


def test_arena_reward_reads_a_dict_ground_truth():
    parts = compute_score("d", WELL_FORMED.format("Paris"), {"answers": ["paris"], "supporting": [5, 1, 5]})
    assert parts == {"score": 13.0, "format": 1.0, "accuracy": 1.0, "relevance": 1.0, "bonus": 10.0,
                     "parse_status": 0.0}


def test_arena_gold_answer_may_be_one_string():
    assert compute_score("d", WELL_FORMED.format("Paris"), {"answers": "Paris", "supporting": [1, 5]})["accuracy"] == 1.0


def test_arena_gold_answers_use_arenas_normalisation():
    # ARENA turns "_" into a space on both sides: "new_york" is "new york" (SQuAD's style would read "newyork")
    assert compute_score("d", WELL_FORMED.format("New York"), {"answers": ["new_york"]})["accuracy"] == 1.0


def test_arena_supporting_ids_default_to_empty():
    # no "supporting" key: the gold set is empty, which an empty relevance list matches exactly
    text = "<relevance>[]</relevance><analysis>a</analysis><answer>Paris</answer>"
    assert compute_score("d", text, {"answers": ["Paris"]})["relevance"] == 1.0
    assert compute_score("d", WELL_FORMED.format("Paris"), {"answers": ["Paris"]})["relevance"] == 0.0


@pytest.mark.parametrize("truth", [
    ["Paris"], "Paris", {"answers": []}, {"answers": {"Paris": 1}}, {"answers": 5}, {"answers": ["Paris", 3]},
    {"supporting": [1]}, {"answers": ["Paris"], "supporting": ""}, {"answers": ["Paris"], "supporting": [1, "5"]},
    {"answers": ["Paris"], "supporting": [1, True]},
])
def test_arena_malformed_ground_truth_scores_zero_with_status(truth):
    assert compute_score("d", WELL_FORMED.format("Paris"), truth) == {
        "score": 0.0, "format": 0.0, "accuracy": 0.0, "relevance": 0.0, "bonus": 0.0, "parse_status": 1.0}


@pytest.mark.parametrize("bonus", [True, "10", math.inf, -math.inf, math.nan, None])
def test_arena_bonus_must_be_a_finite_number(bonus):
    with pytest.raises(ValueError, match="bonus must be a finite number"):
        compute_score("d", WELL_FORMED.format("Paris"), {"answers": ["Paris"]}, bonus=bonus)


def test_arena_bonus_option_is_added_when_all_terms_are_one():
    assert compute_score("d", WELL_FORMED.format("Paris"), {"answers": ["Paris"], "supporting": [1, 5]},
                         bonus=2)["score"] == 5.0


def test_arena_relevance_accuracy_edges():
    # disjoint ids: no overlap; no ids predicted: precision 0; no gold ids: recall 1
    assert relevance_accuracy(WELL_FORMED.format("x"), [2, 3]) == {
        "relevance_exact": 0.0, "relevance_overlap": 0.0, "relevance_precision": 0.0, "relevance_recall": 0.0}
    assert relevance_accuracy("<answer>x</answer>", [2]) == {
        "relevance_exact": 0.0, "relevance_overlap": 0.0, "relevance_precision": 0.0, "relevance_recall": 0.0}
    assert relevance_accuracy(WELL_FORMED.format("x"), []) == {
        "relevance_exact": 0.0, "relevance_overlap": 0.0, "relevance_precision": 0.0, "relevance_recall": 1.0}


@pytest.mark.parametrize("text", [None, 3, "no answer block", "<answer>[1]"])
def test_barrag_selection_without_an_answer_block(text):
    assert parse_selection(text, 5) == Selection((), False, 0, 0)
    assert not parse_selection(text, 5).valid


def test_barrag_selection_counts_repeats_and_out_of_range_ids():
    # 5 is the last in-range id (n_docs = 5); two repeats of it, three ids outside 1..5
    assert parse_selection("<answer>[5], [5], [6], [5], [0], [7]</answer>", 5) == Selection((5,), True, 2, 3)


def test_barrag_selection_format_round_trips():
    assert format_selection([3, 5, 1]) == "[3], [5], [1]"
    assert format_selection([]) == ""
    assert parse_selection(f"<answer>{format_selection((3, 5, 1))}</answer>", 5) == Selection((3, 5, 1), True, 0, 0)


@pytest.mark.parametrize("text", [None, 3])
def test_barrag_generation_of_a_non_string(text):
    assert parse_generation(text, 5) == Generation(None, frozenset())
