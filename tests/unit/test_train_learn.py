"""The learning benchmark's held-out figures, on hand-made answers (the GRPO run itself is `make train-learn`)."""

import json

import pytest

from recipes.train_learn import score_answers, verdict

# labels of passages [1]..[5] as presented; the best order is [4] > [2] > ...
SET = {"ground_truth": json.dumps({"labels": [0, 1, 0, 2, 0]})}


def test_score_answers_by_hand():
    figures = score_answers(["[4] > [2] > [1] > [3] > [5]", "[1] > [2]", "no ids at all"], [SET] * 3)
    # 1st: ideal order, r_rank 1 -> score 0.8 (no <think>/<answer> tags: no format parts); status ok
    # 2nd: ids 1, 2 then missing 3, 4, 5 appended = the presented order, r_rank 0; status missing_ids
    # 3rd: no id, presented order kept, r_rank 0; status wrong_format
    assert figures["mean_reward"] == pytest.approx(0.8 / 3)
    assert figures["format_valid"] == pytest.approx(1 / 3) and figures["names_ids"] == pytest.approx(2 / 3)
    assert figures["statuses"] == {"ok": 1, "missing_ids": 1, "wrong_format": 1}
    # nDCG@10 (linear gains, as trec_eval) of the presented order: DCG = 1/log2(3) + 2/log2(5) = 0.6309 + 0.8614
    # = 1.4923; ideal DCG = 2/log2(2) + 1/log2(3) = 2.6309 -> 0.5672; mean of (1, 0.5672, 0.5672)
    assert figures["ndcg"] == pytest.approx((1 + 2 * 1.4923 / 2.6309) / 3, abs=1e-4)


def test_verdict_says_what_rose_and_what_did_not():
    evals = [{"step": 0, "mean_reward": 0.0, "format_valid": 0.0, "ndcg": 0.5, "names_ids": 0.0},
             {"step": 5, "mean_reward": 0.0, "format_valid": 0.25, "ndcg": 0.4, "names_ids": 1.0}]
    lines = verdict(evals)
    assert lines[0].endswith("DID NOT RISE (unchanged)") and lines[1].endswith("ROSE")
    assert lines[2].endswith("DID NOT RISE (fell)") and lines[3].endswith("ROSE")
