"""Edges of the listwise reward that mutation testing found untested (docs/testing.md): ground truths it must
refuse, the 10-rank cutoff, the released variant's pool, and the option errors."""

from __future__ import annotations

import json
import math

import pytest

from rearank.methods import truth as decoding
from rearank.methods.listwise import reward
from rearank.methods.listwise.reward import (
    PARSE_STATUSES,
    compute_score,
    rank_reward_value,
    released_permutation,
)
from rearank.methods.truth import parse_ground_truth

BAD = float(PARSE_STATUSES.index("bad_ground_truth"))
LOG3 = math.log2(3)


@pytest.fixture(autouse=True)
def decode_afresh():
    """Each test decodes its ground truths itself: the decoding cache would otherwise answer from whatever ran
    before in this process (mutmut's workers inherit one filled by the unmutated code)."""
    decoding._truth_from_json.cache_clear()


@pytest.mark.parametrize("truth", ["5", '["1", 2]', '{"labels": [1, Infinity]}', "not json", '{"labels": true}'])
def test_malformed_ground_truths_score_zero_without_raising(truth):
    for variant in ("default", "released"):
        out = compute_score("d", "<answer>[1]</answer>", truth, variant=variant)
        assert out["parse_status"] == BAD and out["score"] == 0.0
    assert parse_ground_truth(truth) is None


def test_presented_order_ndcg():
    assert compute_score("d", "", json.dumps([0, 0, 3]))["init_ndcg"] == pytest.approx(0.5)
    assert compute_score("d", "", json.dumps([0, 1]))["init_ndcg"] == pytest.approx(1 / LOG3)  # ideal DCG of 1
    assert compute_score("d", "", json.dumps([0, 0]))["init_ndcg"] == 0.0
    # a relevant passage presented 12th is outside nDCG@10 of the presented order (its ideal puts it first)
    assert compute_score("d", "", json.dumps([0] * 11 + [1]))["init_ndcg"] == 0.0


def test_released_ndcg_is_cut_at_10_and_normalised_by_the_pool():
    labels = [0] * 11 + [2]
    out = compute_score("d", "<answer>[12] > [1]</answer>", json.dumps({"labels": labels}), variant="released")
    assert (out["ndcg"], out["init_ndcg"], out["ideal_ndcg"], out["r_rank"]) == (1.0, 0.0, 1.0, 1.0)
    pool = [1] * 12  # 12 grade-1 judgments: the pool's ideal DCG@10 counts only 10 of them
    pool_idcg = sum(1 / math.log2(i + 2) for i in range(10))
    out = compute_score("d", "<answer>[2] > [1]</answer>", json.dumps({"labels": [0, 1], "pool": pool}),
                        variant="released")
    assert out["ndcg"] == round(1 / pool_idcg, 5) and out["init_ndcg"] == round(1 / LOG3 / pool_idcg, 5)
    plain = compute_score("d", "<answer>[2] > [1]</answer>", json.dumps([0, 1]), variant="released")
    assert plain["ndcg"] == 1.0 and plain["init_ndcg"] == round(1 / LOG3, 5)  # no pool: the set's own labels
    unset = compute_score("d", "<answer>[2] > [1]</answer>", json.dumps({"labels": [0, 1], "pool": None}),
                          variant="released")
    assert unset["ndcg"] == 1.0


def test_released_scores_of_a_set_without_relevance_and_of_a_non_text_completion():
    out = compute_score("d", "<think>t</think><answer>[2] > [1]</answer>", json.dumps([0, 0]), variant="released")
    assert (out["ndcg"], out["init_ndcg"], out["ideal_ndcg"], out["r_rank"]) == (0.0, 0.0, 0.0, 0.0)
    out = compute_score("d", None, json.dumps([0, 1]), variant="released")
    assert out["format_tags"] == out["format_answer"] == out["r_rank"] == 0.0
    assert out["parse_status"] == float(PARSE_STATUSES.index("wrong_format"))


def test_released_permutation_keeps_id_1_and_drops_n_plus_1():
    assert released_permutation("<answer>[1] > [3] > [2]</answer>", 3) == [0, 2, 1]
    assert released_permutation("<answer>[4] > [2]</answer>", 3) == [1, 0, 2]
    assert released_permutation("<answer>[0] > [3]</answer>", 3) == [2, 0, 1]


def test_rank_reward_tolerance_at_the_ideal():
    assert rank_reward_value(1.0 - 1e-12, 0.5, 1.0) == 1.0  # within the tolerance of the best: the full reward
    assert rank_reward_value(0.75, 0.5, 1.0) == 0.5
    assert rank_reward_value(0.5 - 1e-12, 0.5, 0.5) == 0.0 and rank_reward_value(0.4, 0.5, 0.5) == -1.0


def test_rank_reward_tolerance_bounds_are_inclusive():
    eps = reward._EPS
    assert rank_reward_value(eps, 0.0, eps) == 0.0  # a gap of exactly eps is no gap: no reward for reaching it
    assert rank_reward_value(0.5 - eps, 0.5, 0.5) == 0.0  # exactly eps below the presented order: still no loss
    assert rank_reward_value(1.0 - eps, 0.5, 1.0) == 1.0  # exactly eps below the best: the full reward


def test_answer_only_rows_need_the_answer_block_alone():
    truth = json.dumps([0, 2, 1])
    out = compute_score("d", "<answer>[2] > [3] > [1]</answer>", truth, reasoning=False)
    assert (out["format_tags"], out["format_answer"], out["r_rank"], out["score"]) == (1.0, 1.0, 1.0, 1.0)
    assert compute_score("d", "<answer>[2] > [3] > [1]</answer>", truth)["format_tags"] == 0.0  # no <think>
    assert compute_score("d", "[2] > [3] > [1]", truth, reasoning=False)["format_tags"] == 0.0
    out = compute_score("d", None, truth, reasoning=False)  # a non-text completion scores 0 without raising
    assert (out["format_tags"], out["format_answer"], out["r_rank"]) == (0.0, 0.0, 0.0)


@pytest.mark.parametrize(("options", "message"), [
    ({"variant": "other"}, "variant must be one of default, released; got 'other'"),
    ({"rank_reward": "other"}, "rank_reward must be one of normalized, absolute, difference; got 'other'"),
    ({"rank_weight": math.nan}, "rank_weight must be a finite number; got nan"),
    ({"tags_weight": "0.1"}, "tags_weight must be a finite number; got '0.1'"),
    ({"answer_weight": math.inf}, "answer_weight must be a finite number; got inf"),
])
def test_option_errors_name_the_option(options, message):
    with pytest.raises(ValueError) as err:
        compute_score("d", "", json.dumps([1]), **options)
    assert str(err.value) == message
