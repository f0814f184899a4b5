"""ReasonRank's multi-view reward against an independent computation: pytrec_eval's ``ndcg_cut_10`` (grades as
gains) and ``recall_10``, and the ``rbo`` package's ``RankingSimilarity(pred, gold).rbo()``; and its format rules."""

from __future__ import annotations

import json
import random

import pytest
import pytrec_eval
import rbo

from rearank.measures.rbo import average_overlap
from rearank.methods.listwise.answer import format_answer
from rearank.methods.listwise.reasonrank import compute_score, parse_truth, truth_record


def independent(predicted: list[str], gold: list[str], relevant: dict[str, int]) -> float:
    """ReasonRank's R_m computed with pytrec_eval and the rbo package, as their released reward does."""
    run = {"q": {docid: -(i + 1.0) for i, docid in enumerate(predicted)}}
    evaluator = pytrec_eval.RelevanceEvaluator({"q": relevant}, {"ndcg_cut.10", "recall.10"})
    measures = evaluator.evaluate(run)["q"]
    return measures["ndcg_cut_10"] + 0.2 * measures["recall_10"] + 0.1 * rbo.RankingSimilarity(predicted, gold).rbo()


def case(rng: random.Random):
    n = rng.randint(2, 20)
    ids = [f"doc{rng.randrange(10**6)}-{i}" for i in range(n)]
    relevant = {d: rng.randint(1, 3) for d in rng.sample(ids, rng.randint(1, n))}
    if rng.random() < 0.3:  # judged relevant passages outside the window count in the ideal and the recall
        relevant[f"outside-{rng.randrange(100)}"] = rng.randint(1, 3)
    if rng.random() < 0.3:
        relevant[rng.choice(ids)] = 0
    gold = rng.sample(ids, n)
    predicted = rng.sample(ids, n)
    return ids, gold, relevant, predicted


def completion(ids, predicted, think="I compared the passages."):
    order = [ids.index(d) for d in predicted]
    return f"<think>{think}</think>\n<answer>{format_answer(order)}</answer>"


@pytest.mark.parametrize("seed", range(60))
def test_the_reward_equals_pytrec_eval_and_the_rbo_package(seed):
    ids, gold, relevant, predicted = case(random.Random(seed))
    truth = json.dumps(truth_record(ids, gold, relevant))
    result = compute_score("reasonrank", completion(ids, predicted), truth)
    assert result["score"] == pytest.approx(independent(predicted, gold, relevant), abs=1e-12)
    assert result["format"] == result["permutation"] == 1.0 and result["bad_ground_truth"] == 0.0


@pytest.mark.parametrize("seed", range(20))
def test_average_overlap_is_the_rbo_package_default(seed):
    rng = random.Random(seed)
    items = list(range(rng.randint(1, 30)))
    a, b = rng.sample(items, len(items)), rng.sample(items, len(items))
    assert average_overlap(a, b) == pytest.approx(rbo.RankingSimilarity(a, b).rbo(), abs=1e-12)


IDS = ["d1", "d2", "d3"]
TRUTH = json.dumps(truth_record(IDS, ["d3", "d1", "d2"], {"d3": 2, "d1": 1}))


@pytest.mark.parametrize("text", [
    "<answer>[3] > [1] > [2]</answer>",                       # no reasoning block
    "<think>reasoning</think>\n[3] > [1] > [2]",              # no answer block
    "<think>unclosed <answer>[3] > [1] > [2]</answer>",
    "[3] > [1] > [2]",
    "",
])
def test_a_broken_format_scores_minus_one(text):
    assert compute_score("reasonrank", text, TRUTH)["score"] == -1.0


@pytest.mark.parametrize("answer", [
    "[3] > [1]",                 # an id missing
    "[3] > [1] > [1]",           # a duplicate
    "[3] > [1] > [4]",           # out of range
    "[3] > [1] > [2] > [2]",     # one id too many
    "[3] > [1] > [x]",           # an id that is not an integer
    "no ranking",
])
def test_an_answer_that_is_not_a_full_permutation_scores_zero(answer):
    result = compute_score("reasonrank", f"<think>t</think><answer>{answer}</answer>", TRUTH)
    assert result["score"] == 0.0 and result["format"] == 1.0 and result["permutation"] == 0.0


def test_the_best_answer_and_whitespace_between_the_blocks():
    best = compute_score("reasonrank", "<think>t</think> \n <answer>[3] > [1] > [2]</answer>", TRUTH)
    assert best["score"] == pytest.approx(1.0 + 0.2 + 0.1) and best["ndcg"] == best["recall"] == best["rbo"] == 1.0


def test_the_answer_only_variant_needs_only_the_answer_block():
    text = "<answer>[3] > [1] > [2]</answer>"
    assert compute_score("reasonrank", text, TRUTH, reasoning=False)["score"] == pytest.approx(1.3)
    assert compute_score("reasonrank", "[3] > [1] > [2]", TRUTH, reasoning=False)["score"] == -1.0


def test_reasonranks_own_rl_rows_are_read_from_extra_info():
    extra = {"initial_list": IDS, "final_list": ["d3", "d1", "d2"], "relevant_docids": ["d3", "d1"]}
    result = compute_score("ranking", "<think>t</think><answer>[1] > [3] > [2]</answer>", "[3] > [1] > [2]", extra)
    assert result["score"] == pytest.approx(independent(["d1", "d3", "d2"], ["d3", "d1", "d2"], {"d3": 1, "d1": 1}))


@pytest.mark.parametrize("truth", [
    None, "", "not json", "[1, 2]", json.dumps({"ids": ["a", "a"], "gold": ["a", "a"], "relevant": {}}),
    json.dumps({"ids": ["a", "b"], "gold": ["a", "c"], "relevant": {}}),
    json.dumps({"ids": ["a", "b"], "gold": ["a", "b"], "relevant": {"a": "2"}}),
    json.dumps({"ids": ["a", "b"], "gold": ["a", "b"], "relevant": [1]}),
])
def test_a_ground_truth_that_does_not_decode_scores_zero_and_says_so(truth):
    assert parse_truth(truth) is None
    result = compute_score("reasonrank", "<think>t</think><answer>[1] > [2]</answer>", truth)
    assert result["score"] == 0.0 and result["bad_ground_truth"] == 1.0
