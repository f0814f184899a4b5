"""rearank.methods.listwise.reward: the verl reward -- definition on hand-checkable sets, edge cases, never raising."""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rearank.methods.listwise.answer import format_answer
from rearank.methods.listwise.reward import PARSE_STATUSES, RANK_REWARDS, compute_score
from rearank.methods.truth import parse_ground_truth

PARTS = {"score", "ndcg", "init_ndcg", "ideal_ndcg", "r_rank", "format_tags", "format_answer", "parse_status"}
BAD = float(PARSE_STATUSES.index("bad_ground_truth"))


def answer(permutation, think="I compared the passages."):
    return f"<think>{think}</think>\n<answer>{format_answer(permutation)}</answer>"


def gt(labels):
    return json.dumps({"labels": labels})


# Labels [0, 1] in presented order: nDCG@10(presented) = (1/log2 3) / 1, the reversed order is ideal.
TWO = gt([0, 1])
NDCG_PRESENTED_TWO = 1 / math.log2(3)


def test_ideal_answer_scores_one():
    r = compute_score("d", answer([1, 0]), TWO)
    assert set(r) == PARTS
    assert r["score"] == pytest.approx(1.0) and r["r_rank"] == pytest.approx(1.0)
    assert r["ndcg"] == pytest.approx(1.0) and r["ideal_ndcg"] == 1.0
    assert r["init_ndcg"] == pytest.approx(NDCG_PRESENTED_TWO)
    assert r["parse_status"] == PARSE_STATUSES.index("ok")


def test_presented_order_earns_only_the_format_rewards():
    r = compute_score("d", answer([0, 1]), TWO)
    assert r["r_rank"] == pytest.approx(0.0) and r["score"] == pytest.approx(0.2)
    assert r["format_tags"] == 1.0 and r["format_answer"] == 1.0


def test_normalized_gain_in_between_and_negative_clipped():
    # labels [1, 0, 2]: presented DCG = 1 + 2/2 = 2; ideal DCG = 2 + 1/log2 3
    idcg = 2 + 1 / math.log2(3)
    init = 2 / idcg
    ndcg = (1 + 2 / math.log2(3)) / idcg  # answer [1] > [3] > [2]
    r = compute_score("d", answer([0, 2, 1]), gt([1, 0, 2]))
    assert r["r_rank"] == pytest.approx((ndcg - init) / (1 - init)) and 0 < r["r_rank"] < 1
    # labels [2, 0, 1]: presented order is nearly ideal; the ascending order's raw gain is far below -1
    init = (2 + 1 / 2) / idcg
    worst = (1 / math.log2(3) + 2 / 2) / idcg  # answer [2] > [3] > [1]
    assert (worst - init) / (1 - init) < -1
    assert compute_score("d", answer([1, 2, 0]), gt([2, 0, 1]))["r_rank"] == -1.0


def test_garbage_scores_zero_and_keeps_the_presented_order():
    r = compute_score("d", "I cannot rank these passages.", TWO)
    assert r["score"] == 0.0 and r["r_rank"] == 0.0
    assert r["ndcg"] == pytest.approx(NDCG_PRESENTED_TWO)
    assert r["parse_status"] == PARSE_STATUSES.index("wrong_format")


@pytest.mark.parametrize("text", ["", "   ", "<think>", "</answer><answer>", "<think>unfinished reasoning"])
def test_empty_and_cut_completions(text):
    r = compute_score("d", text, TWO)
    assert r["r_rank"] == 0.0 and r["score"] == 0.0


def test_repaired_answers_earn_their_permutation_but_no_strict_format():
    labels = [0, 0, 3]  # passage [3] is the only relevant one: any answer putting it first is ideal
    for text, status in [
        ("<think>t</think><answer>[3] > [3] > [1]</answer>", "repetition"),
        ("<think>t</think><answer>[3] > [9] > [1] > [2]</answer>", "out_of_range"),
    ]:
        r = compute_score("d", text, gt(labels))
        assert r["r_rank"] == 1.0 and r["format_tags"] == 1.0 and r["format_answer"] == 0.0
        assert r["score"] == pytest.approx(0.9) and r["parse_status"] == PARSE_STATUSES.index(status)
    # missing ids are appended in presented order; the answer is still strict ([i] > [j] with valid ids)
    r = compute_score("d", "<think>t</think><answer>[3]</answer>", gt(labels))
    assert r["r_rank"] == 1.0 and r["parse_status"] == PARSE_STATUSES.index("missing_ids")


def test_truncated_answer_keeps_its_ids_and_loses_the_format_rewards():
    r = compute_score("d", "<think>t</think><answer>[2] > [1", TWO)
    assert r["r_rank"] == 1.0 and r["format_tags"] == 0.0 and r["format_answer"] == 0.0
    assert r["score"] == pytest.approx(0.8) and r["parse_status"] == PARSE_STATUSES.index("truncated")


def test_presented_order_already_ideal():
    labels = gt([2, 1, 0])
    assert compute_score("d", answer([0, 1, 2]), labels)["r_rank"] == 0.0
    assert compute_score("d", answer([0, 2, 1]), labels)["r_rank"] == -1.0
    assert compute_score("d", "no ids", labels)["score"] == 0.0
    assert compute_score("d", answer([1, 0, 2]), gt([1, 1, 0]))["r_rank"] == 0.0  # swapping equal labels is no loss


def test_no_positive_label_gives_no_ranking_signal():
    for text in (answer([1, 0, 2]), answer([0, 1, 2]), "garbage"):
        r = compute_score("d", text, gt([0, 0, 0]))
        assert r["r_rank"] == 0.0 and r["ideal_ndcg"] == 0.0


def test_variants_and_weights():
    labels = [1, 0, 2]
    idcg = 2 + 1 / math.log2(3)
    init, ndcg = 2 / idcg, (1 + 2 / math.log2(3)) / idcg
    r = compute_score("d", answer([0, 2, 1]), gt(labels), rank_reward="absolute")
    assert r["r_rank"] == pytest.approx(ndcg) and r["score"] == pytest.approx(0.8 * ndcg + 0.2)
    r = compute_score("d", answer([0, 2, 1]), gt(labels), rank_reward="difference")
    assert r["r_rank"] == pytest.approx(ndcg - init)
    r = compute_score("d", answer([2, 0, 1]), gt(labels), rank_weight=1.0, tags_weight=0.0, answer_weight=0.5)
    assert r["score"] == pytest.approx(1.5)


@pytest.mark.parametrize("bad", [{"rank_reward": "ndcg"}, {"rank_weight": "0.8"}, {"tags_weight": float("nan")}])
def test_invalid_options_raise(bad):
    with pytest.raises(ValueError):
        compute_score("d", answer([1, 0]), TWO, **bad)


def test_ground_truth_forms():
    expected = (0.0, 1.0)
    for form in (TWO, "[0, 1]", TWO.encode(), {"labels": [0, 1]}, [0, 1], (0, 1), np.array([0, 1]),
                 {"labels": np.array([0, 1])}, json.dumps({"labels": [0, 1], "qid": "7", "k": 10})):
        assert parse_ground_truth(form) == expected, form
        assert compute_score("d", answer([1, 0]), form)["score"] == pytest.approx(1.0)


@pytest.mark.parametrize("bad", [
    None, "", "not json", "{}", '{"labels": []}', '{"labels": "0 1"}', '{"labels": [0, "1"]}', '{"labels": [true]}',
    '{"labels": [NaN, 1]}', '{"labels": [Infinity]}', '{"labels": [1e999]}', f'[{10 ** 400}]', '{"labels": null}',
    '{"labels": [[0, 1]]}', "[" * 100000, b"\xff\xfe", 3, 1.5, {"rel": [0, 1]}, [None], object(),
])
def test_malformed_ground_truth_scores_zero_and_is_flagged(bad):
    r = compute_score("d", answer([1, 0]), bad)
    assert set(r) == PARTS and r["score"] == 0.0 and r["parse_status"] == BAD
    assert all(v == 0.0 for k, v in r.items() if k != "parse_status")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.sampled_from(["labels", "x"]), children),
    max_leaves=20,
)
id_chunks = st.lists(st.sampled_from(["[", "]", " > ", "<think>", "</think>", "<answer>", "</answer>", "\n"])
                     | st.integers(-3, 30).map(str) | st.text(max_size=8), max_size=40).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(st.text(max_size=300), id_chunks, st.none(), st.integers()),
       truth=st.one_of(json_values, json_values.map(json.dumps), st.text(max_size=50), st.binary(max_size=20)),
       rank_reward=st.sampled_from(RANK_REWARDS))
def test_never_raises_and_stays_in_bounds(text, truth, rank_reward):
    r = compute_score("d", text, truth, rank_reward=rank_reward)
    assert set(r) == PARTS
    assert all(isinstance(v, float) and math.isfinite(v) for v in r.values())
    assert -1.0 <= r["r_rank"] <= 1.0 and -0.8 <= r["score"] <= 1.0
    assert r["parse_status"] in range(len(PARSE_STATUSES))


labels_st = st.lists(st.integers(-1, 3), min_size=1, max_size=25)


@settings(max_examples=300, deadline=None)
@given(labels=labels_st, data=st.data())
def test_any_permutation_in_bounds_and_ideal_scores_one(labels, data):
    truth = gt(labels)
    perm = data.draw(st.permutations(range(len(labels))))
    r = compute_score("d", answer(perm), truth)
    assert -1.0 <= r["r_rank"] <= 1.0
    assert r["format_tags"] == 1.0 and r["format_answer"] == 1.0
    ideal = sorted(range(len(labels)), key=lambda i: -labels[i])
    best = compute_score("d", answer(ideal), truth)
    improvable = max(labels) > 0 and best["ndcg"] > best["init_ndcg"] + 1e-9
    assert best["score"] == pytest.approx(1.0 if improvable else 0.2)
