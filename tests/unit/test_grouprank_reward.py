import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import entropy

from rearank.measures.rbo import rbo
from rearank.methods.groupwise.parser import format_scores, label_scores
from rearank.methods.groupwise.reward import PARSE_STATUSES, PARTS, compute_score, group_reward_parts

LABELS = [3, 0, 1, 0, 2, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]
GT = json.dumps({"labels": LABELS})


def completion(scores, reason="thinking"):
    return f"<reason>{reason}</reason>\n<answer>{format_scores(scores)}</answer>"


def rbo_by_definition(a, b, p):
    """RBO_ext from Webber et al. (2010), eq. 32, with explicit prefix intersections."""
    k = len(a)
    agreement = [len(set(a[:d]) & set(b[:d])) / d for d in range(1, k + 1)]
    return agreement[-1] * p**k + (1 - p) / p * sum(agreement[d - 1] * p**d for d in range(1, k + 1))


def test_ideal_completion():
    r = compute_score("dl21", completion(label_scores(LABELS, 3)), GT, max_label=3)
    assert (r["r_recall"], r["r_rank"], r["ndcg"]) == (1.0, 1.0, 1.0)
    assert r["rbo"] == pytest.approx(1.0)
    assert r["r_dist"] > 0.99  # 0-3 labels land on 0, 3, 7, 10: almost the label distribution
    assert r["score"] == pytest.approx(0.2 + 0.5 + 0.1 * r["r_dist"])
    assert r["format_tags"] == r["format_json"] == 1.0 and PARSE_STATUSES[int(r["parse_status"])] == "ok"


def test_format_levels():
    assert compute_score("d", "<reason>x</reason><answer>[1] > [2]</answer>", GT)["score"] == 0.0
    r = compute_score("d", format_scores(label_scores(LABELS)), GT)  # perfect JSON, no tags
    assert r["score"] == -1.0 and r["format_json"] == 1.0 and r["format_tags"] == 0.0
    assert compute_score("d", "", GT)["score"] == -1.0
    r = compute_score("d", "<reason>x</reason><answer>{}</answer>", GT)  # valid JSON, no id: all scores 0
    assert r["format_json"] == 1.0 and r["score"] > 0.0


def test_ties_are_broken_pessimistically():
    r = compute_score("d", completion([5] * 20), GT)
    assert r["ndcg"] == 0.0 and r["r_recall"] == 0.0  # the 16 zero labels come first
    parts = group_reward_parts([1, 0], [5, 5])
    assert parts["ndcg"] == pytest.approx(1 / math.log2(3))  # d1 (label 0) before d0 (label 1)


def test_parts_by_hand():
    labels = [0, 2, 1, 0]
    scores = [9, 1, 5, 0]  # order d0, d2, d1, d3 -> labels 0, 1, 2, 0
    parts = group_reward_parts(labels, scores, k=2, rbo_p=0.5, eps=0.01, max_label=2)
    dcg = 1 / math.log2(3)
    idcg = 2 + 1 / math.log2(3)
    assert parts["ndcg"] == pytest.approx(dcg / idcg)
    assert parts["r_recall"] == pytest.approx(1 / 2)  # one of the 2 relevant in the top 2
    ideal = [1, 2, 0, 3]  # labels 2, 1, then the zeros in predicted order (d0 before d3)
    assert parts["rbo"] == pytest.approx(rbo_by_definition([0, 2, 1, 3], ideal, 0.5))
    gt = [label / 2 + 0.01 for label in labels]
    pred = [s / 10 + 0.01 for s in scores]
    assert parts["kl"] == pytest.approx(entropy(gt, pred))
    assert parts["r_dist"] == pytest.approx(max(0.0, 1 - entropy(gt, pred)))
    assert parts["r_rank"] == pytest.approx((parts["ndcg"] + parts["rbo"]) / 2)


def test_no_relevant_document_every_order_is_ideal():
    parts = group_reward_parts([0, 0, 0], [3, 9, 1])
    assert (parts["ndcg"], parts["r_recall"], parts["rbo"]) == (1.0, 1.0, 1.0)


def test_options_change_the_score():
    text = completion([9, 0, 4, 0, 7] + [0] * 15)
    base = compute_score("d", text, GT)
    r = compute_score("d", text, GT, recall_weight=1.0, rank_weight=0.0, dist_weight=0.0)
    assert r["score"] == pytest.approx(base["r_recall"])
    assert compute_score("d", text, GT, k=3)["r_recall"] != base["r_recall"]
    assert compute_score("d", text, GT, rbo_p=0.5)["rbo"] != base["rbo"]
    assert compute_score("d", "no tags", GT, invalid_score=-0.5)["score"] == -0.5
    assert compute_score("d", "<reason>x</reason><answer>?</answer>", GT, tags_only_score=0.1)["score"] == 0.1
    # verl adds keyword arguments of its own; they are ignored
    assert compute_score("d", text, GT, reward_router_address=None, extra_info={"x": 1}) == base


@pytest.mark.parametrize("kwargs", [
    {"k": 0}, {"k": 2.5}, {"rbo_p": 1.0}, {"rbo_p": 0}, {"eps": 0}, {"max_label": -1}, {"rank_weight": "x"},
    {"recall_weight": float("nan")}, {"rank_reward": "normalized"}, {"tags_weight": 0.1},
])
def test_invalid_options_raise(kwargs):
    with pytest.raises(ValueError):
        compute_score("d", completion([1] * 20), GT, **kwargs)


def test_ground_truth_forms():
    text = completion(label_scores(LABELS))
    as_dict = compute_score("d", text, {"labels": LABELS})
    assert compute_score("d", text, GT) == as_dict == compute_score("d", text, GT.encode())
    bad = compute_score("d", text, "{not json")
    assert bad["score"] == 0.0 and PARSE_STATUSES[int(bad["parse_status"])] == "bad_ground_truth"
    assert set(bad) == set(PARTS) == set(as_dict)


@given(st.lists(st.integers(0, 20), min_size=0, max_size=25), st.data())
def test_rbo_matches_definition(items, data):
    a = list(dict.fromkeys(items))
    b = data.draw(st.permutations(a))
    p = data.draw(st.floats(0.05, 0.95))
    value = rbo(a, b, p)
    assert 0.0 <= value <= 1.0 + 1e-12
    if a:
        assert value == pytest.approx(rbo_by_definition(a, b, p))
        assert rbo(a, a, p) == pytest.approx(1.0)


@given(st.text(), st.lists(st.integers(-1, 4), min_size=1, max_size=30))
def test_never_raises_on_any_text(text, labels):
    r = compute_score("d", text, json.dumps({"labels": labels}))
    assert set(r) == set(PARTS) and all(isinstance(v, float) for v in r.values())
    assert -1.0 <= r["score"] <= 0.8 + 1e-9


@given(st.lists(st.integers(0, 3), min_size=1, max_size=30), st.data())
def test_valid_completions_score_in_range(labels, data):
    scores = data.draw(st.lists(st.integers(0, 10) | st.floats(-5, 15), min_size=len(labels), max_size=len(labels)))
    r = compute_score("d", completion(scores), json.dumps({"labels": labels}))
    assert 0.0 <= r["score"] <= 0.8 + 1e-9
    for part in ("r_recall", "r_rank", "r_dist", "ndcg", "rbo"):
        assert 0.0 <= r[part] <= 1.0 + 1e-9


@given(st.one_of(st.none(), st.integers(), st.text(), st.lists(st.text()), st.dictionaries(st.text(), st.text())))
def test_never_raises_on_any_ground_truth(ground_truth):
    assert set(compute_score("d", completion([1, 2]), ground_truth)) == set(PARTS)


def test_dist_floor_off_gives_the_papers_unclipped_one_minus_kl():
    scores = [0, 10, 0, 10, 0, 10, 10, 10, 10, 10, 10, 0, 10, 10, 10, 10, 10, 10, 10, 10]  # mass on the irrelevant
    gt = [label / 3 + 0.01 for label in LABELS]
    pred = [s / 10 + 0.01 for s in scores]
    floored = compute_score("dl21", completion(scores), GT, max_label=3)
    paper = compute_score("dl21", completion(scores), GT, max_label=3, dist_floor=False)
    assert entropy(gt, pred) > 1  # Eq. 8 goes below zero here
    assert paper["r_dist"] == pytest.approx(1 - entropy(gt, pred))
    assert floored["r_dist"] == 0.0
    assert paper["score"] - floored["score"] == pytest.approx(0.1 * paper["r_dist"])
    good = completion(label_scores(LABELS, 3))
    assert compute_score("d", good, GT, max_label=3, dist_floor=False)["r_dist"] == pytest.approx(
        compute_score("d", good, GT, max_label=3)["r_dist"])  # above 0 the two forms agree
    with pytest.raises(ValueError, match="dist_floor"):
        compute_score("d", good, GT, dist_floor="no")
