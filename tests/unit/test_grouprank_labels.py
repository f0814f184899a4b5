"""Teacher-label arithmetic (Eq. 5-6) and the retry / drop logic of the teachers, with scripted backends."""

from __future__ import annotations

import math

import pytest

from data_synthesis.grouprank_labels import LabelConfig, annotate
from rearank.backends.base import STOP, Generation
from rearank.methods.groupwise.labels import fused_labels, hybrid_scores, minmax, parse_point_score, top_hybrid
from rearank.types import Candidate, Query, Request


def test_hybrid_scores_min_max_each_run_then_weight():
    fused = hybrid_scores({"a": 10.0, "b": 5.0, "c": 0.0}, {"c": 2.0, "d": 1.0}, 0.5)
    assert fused == pytest.approx({"a": 0.5, "b": 0.25, "c": 0.5, "d": 0.0})
    assert [d for d, _ in top_hybrid({"a": 10.0, "b": 5.0, "c": 0.0}, {"c": 2.0, "d": 1.0}, 0.5, 2)] == ["a", "c"]
    assert minmax([3.0, 3.0]) == [0.0, 0.0]
    with pytest.raises(ValueError, match="fusion weight"):
        hybrid_scores({}, {}, 1.5)


def test_fused_labels_are_eq_6():
    point, ranks = [10.0, 4.0, 0.0], [2, 1, 3]
    s_list = [-math.log(r) for r in ranks]
    low, high = min(s_list), max(s_list)
    expected = [0.5 * p / 10 + 0.5 * (s - low) / (high - low) for p, s in zip(point, s_list)]
    assert fused_labels(point, ranks) == pytest.approx(expected)
    with pytest.raises(ValueError, match="^listwise ranks are 1-based$"):
        fused_labels([1.0], [0])


@pytest.mark.parametrize("text, score", [
    ("It answers it.\nRelevance score: 7.", 7.0), ("relevance score:3 ... Relevance Score: 9", 9.0),
    ("Relevance score: 11.", None), ("Relevance score: -1", None), ("I think 7", None), (None, None),
])
def test_point_score_parser(text, score):
    assert parse_point_score(text) == score


class Scripted:
    """A backend answering each prompt from a queue of texts (pointwise prompts have one docid)."""

    def __init__(self, answers):
        self.answers, self.calls = list(answers), 0

    def generate(self, prompts, settings):
        self.calls += len(prompts)
        return [Generation(text=self.answers.pop(0), prompt_tokens=1, completion_tokens=1, finish_reason=STOP,
                           latency_s=0.0) for _ in prompts]


def request(n):
    return Request(Query("q1", "query"), [Candidate(f"d{i}", float(n - i), f"text {i}") for i in range(n)])


def test_a_pointwise_answer_that_fails_is_asked_again():
    pool = request(2).candidates
    point = Scripted(["no score here", "Relevance score: 4.", "Relevance score: 8."])
    listwise = Scripted(["<think>x</think><answer>[2] > [1]</answer>"])
    record = annotate(request(2), pool, point, listwise, LabelConfig(retries=2))
    assert not record["dropped"] and record["point"] == [8.0, 4.0]
    assert record["failures"]["pointwise"] == 1 and record["point_raw"][0] == ["no score here", "Relevance score: 8."]
    assert record["ranks"] == [2, 1] and record["s_gt"] == pytest.approx([0.5, 0.5])


def test_a_listwise_answer_that_never_parses_drops_the_query_after_the_retries():
    pool = request(3).candidates
    point = Scripted(["Relevance score: 1."] * 3)
    listwise = Scripted(["[1] > [2]", "garbage", "[3] > [3] > [1]"])  # missing, none, repeated ids
    record = annotate(request(3), pool, point, listwise, LabelConfig(retries=2))
    assert record["dropped"] and "s_gt" not in record
    assert record["failures"]["listwise"] == 3 and len(record["list_raw"]) == 3


def test_hybrid_scores_weight_each_run_and_keep_the_key_order():
    first, second = {"a": 4.0, "b": 0.0}, {"c": 1.0, "a": 3.0, "b": 2.0}  # second's norm: c 0, a 1, b 0.5
    fused = hybrid_scores(first, second, 0.25)
    assert list(fused) == ["a", "b", "c"]  # first's keys, then second's new ones
    assert fused == pytest.approx({"a": 0.25 * 1 + 0.75 * 1, "b": 0.25 * 0 + 0.75 * 0.5, "c": 0.0})
    assert hybrid_scores(first, second) == hybrid_scores(first, second, 0.5)  # the paper's equal weights by default
    assert hybrid_scores(first, second, 0.0) == pytest.approx({"a": 1.0, "b": 0.5, "c": 0.0})  # the bounds are allowed
    assert hybrid_scores(first, second, 1.0) == pytest.approx({"a": 1.0, "b": 0.0, "c": 0.0})
    with pytest.raises(ValueError, match="fusion weight"):
        hybrid_scores(first, second, -0.1)


def test_top_hybrid_keeps_the_key_order_on_ties_and_cuts_at_k():
    first = {"x": 1.0, "y": 1.0, "z": 0.0, "w": 2.0}  # norm: x 0.5, y 0.5, z 0, w 1
    assert top_hybrid(first, {}, 1.0, 3) == [("w", 1.0), ("x", 0.5), ("y", 0.5)]
    assert top_hybrid(first, {}, 1.0, 0) == []


def test_fused_labels_weight_alpha_and_check_their_inputs():
    point, ranks = [10.0, 0.0], [1, 2]  # norm(point) 1, 0; norm(-log r) 1, 0
    assert fused_labels(point, ranks, 0.25) == pytest.approx([1.0, 0.0])
    assert fused_labels([0.0, 10.0], ranks, 0.25) == pytest.approx([0.75, 0.25])  # alpha on the pointwise term
    assert fused_labels([0.0, 10.0], ranks, 0.0) == pytest.approx([1.0, 0.0])
    assert fused_labels([0.0, 10.0], ranks, 1.0) == pytest.approx([0.0, 1.0])
    with pytest.raises(ValueError, match="2 pointwise scores but 1 listwise ranks"):
        fused_labels(point, [1])
    with pytest.raises(ValueError, match="alpha"):
        fused_labels(point, ranks, 1.5)
    with pytest.raises(ValueError, match="alpha"):
        fused_labels(point, ranks, -0.5)


@pytest.mark.parametrize("text, score", [
    ("Relevance score: 0", 0.0), ("Relevance score: 10", 10.0), ("RELEVANCE   SCORE : 7.5.", 7.5),
    ("Relevance score: 10.5", None), ("relevance score", None), ("", None),
])
def test_point_score_bounds_and_spellings(text, score):
    assert parse_point_score(text) == score


@pytest.mark.parametrize("text, said", [
    ("It answers the question.\nRelevance score: 7.", "It answers the question."),  # the score line's "." goes
    ("  Partly on topic...  relevance SCORE: 3  ", "Partly on topic"),
    ("Relevance score: 9.", ""),
    ("Typeset in LaTeX\nRelevance score: 5", "Typeset in LaTeX"),  # only dots are trimmed
    ("no score line at all", "no score line at all"),
])
def test_point_rationale_is_the_answer_without_its_score_line(text, said):
    from rearank.methods.groupwise.labels import point_rationale

    assert point_rationale(text) == said
