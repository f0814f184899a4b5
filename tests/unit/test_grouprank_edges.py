"""Edges of the groupwise parser and reward that mutation testing found untested (docs/testing.md)."""

from __future__ import annotations

import json
import re

import pytest

from rearank.grammar import Pattern
from rearank.methods.groupwise.parser import (
    answer_span,
    format_scores,
    has_reason_answer_tags,
    label_scores,
    parse_scores,
    scores_grammar,
)
from rearank.methods.groupwise.reward import compute_score, group_reward_parts


def wrap(answer: str) -> str:
    return f"<reason>r</reason>\n<answer>{answer}</answer>"


def test_the_json_object_ends_at_the_last_brace():
    assert parse_scores(wrap('{"[1]": 5}x'), 1).scores == (5.0,)
    assert parse_scores(wrap('}{"[1]": 5'), 1).json_ok is False


def test_non_canonical_spellings_of_the_first_and_last_ids():
    p = parse_scores(wrap('{"[ 1 ]": 4, " 2": 6}'), 2)
    assert p.scores == (4.0, 6.0) and p.status == "ok"


def test_float_scores_at_the_ends_of_the_scale_are_in_range():
    p = parse_scores(wrap('{"[1]": 0.0, "[2]": 10.0}'), 2)
    assert p.scores == (0.0, 10.0) and p.n_out_of_range == 0 and p.status == "ok"


def test_format_scores_writes_whole_scores_as_integers():
    assert format_scores([7.0, 7.5, 10]) == '{"[1]": 7, "[2]": 7.5, "[3]": 10}'


def test_label_scores_default_top_is_the_highest_label_at_least_1():
    assert label_scores([0, 1]) == [0, 10]
    assert label_scores([0, 0]) == [0, 0]
    assert label_scores([]) == []
    assert label_scores([0, 1, 3]) == [0, 3, 10]


def test_scores_grammar_is_the_format_of_format_scores():
    grammar = scores_grammar(3)
    assert (grammar.think, grammar.opening, grammar.closing) == (("<reason>", "</reason>"), "\n<answer>", "</answer>")
    assert isinstance(grammar.body, Pattern)
    regex = re.compile(grammar.body.regex())
    assert regex.fullmatch(format_scores([10, 0, 7])) and regex.fullmatch(format_scores([1, 2, 3]))
    assert not regex.fullmatch(format_scores([10, 0])) and not regex.fullmatch(format_scores([11, 0, 7]))
    assert not regex.fullmatch('{"[2]": 1, "[1]": 2, "[3]": 3}')
    assert grammar.body.max_chars() == len(format_scores([10, 10, 10]))


def test_listwise_options_are_refused_by_name():
    with pytest.raises(ValueError) as err:
        compute_score("d", "", json.dumps([1]), tags_weight=0.1)
    message = str(err.value)
    assert message.startswith("tags_weight: options of the listwise reward, not the groupwise one; set reward_kwargs "
                              "to the groupwise options (recall_weight, rank_weight, dist_weight, k, rbo_p, ")
    assert message.endswith(", tags_only_score, invalid_score)")


LABELS = [0, 1, 0, 2, 0, 0, 1, 0, 0, 0, 3, 0]  # 12 documents: the best one scored 11th
SCORES = [10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0.5, 0]


def test_reward_defaults_are_the_documented_ones():
    answer = wrap(format_scores(SCORES))
    default = compute_score("d", answer, json.dumps(LABELS))
    explicit = compute_score("d", answer, json.dumps(LABELS), k=10, eps=0.01, rel_threshold=1, max_label=None)
    assert default == explicit
    assert default != compute_score("d", answer, json.dumps(LABELS), k=11)
    assert default != compute_score("d", answer, json.dumps(LABELS), eps=1.01)
    assert default != compute_score("d", answer, json.dumps(LABELS), rel_threshold=2)
    assert default != compute_score("d", answer, json.dumps(LABELS), max_label=10)
    parts = group_reward_parts(LABELS, SCORES)
    assert parts == group_reward_parts(LABELS, SCORES, k=10, eps=0.01, rel_threshold=1, max_label=None)
    assert parts != group_reward_parts(LABELS, SCORES, k=11)
    assert parts != group_reward_parts(LABELS, SCORES, eps=1.01)
    assert parts != group_reward_parts(LABELS, SCORES, max_label=10)


def test_several_listwise_options_are_all_named():
    with pytest.raises(ValueError, match="^rank_reward, answer_weight: options of the listwise reward"):
        compute_score("d", "", json.dumps([1]), answer_weight=0.1, rank_reward="absolute")


@pytest.mark.parametrize("max_label", [0, -1, "3"])
def test_max_label_option_is_checked(max_label):
    with pytest.raises(ValueError, match="max_label"):
        compute_score("d", "", json.dumps([1]), max_label=max_label)


def test_an_empty_answer_block_is_an_empty_span():
    assert answer_span("<reason>x</reason><answer></answer>") == ""


ANSWER_ONLY = '<answer>{"[1]": 10, "[2]": 0}</answer>'


def test_answer_only_text_has_the_tags_only_with_reasoning_off():
    assert has_reason_answer_tags(ANSWER_ONLY) is False
    assert has_reason_answer_tags(ANSWER_ONLY, reasoning=False) is True
    assert parse_scores(ANSWER_ONLY, 2).status == "bad_tags"
    off = parse_scores(ANSWER_ONLY, 2, reasoning=False)
    assert (off.status, off.has_tags, off.scores) == ("ok", True, (10.0, 0.0))


def test_answer_only_rows_score_only_with_reasoning_off():
    truth = json.dumps({"labels": [1, 0]})
    assert compute_score("d", ANSWER_ONLY, truth)["score"] == -1.0  # the invalid score: no <reason> block
    # the ideal order with scores 10/0 for labels 1/0: recall 1, nDCG = RBO = 1, KL 0: 0.2 + 0.5 + 0.1
    assert compute_score("d", ANSWER_ONLY, truth, reasoning=False)["score"] == pytest.approx(0.8)


def test_scores_grammar_without_reasoning_opens_with_the_answer_tag():
    grammar = scores_grammar(2, reasoning=False)
    assert (grammar.think, grammar.opening, grammar.closing) == (None, "<answer>", "</answer>")
