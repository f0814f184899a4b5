"""``variant=released``: the released training reward's rules, checked against scores computed by hand.

Set: 4 passages presented with labels [0, 2, 0, 1]; the query's whole judged pool has grades [3, 2, 1] (a
grade-3 passage is outside the set). Discounts 1/log2(rank + 1): 1, 0.6309298, 0.5, 0.4306766.

    pool ideal DCG@10 = 3*1 + 2*0.6309298 + 1*0.5                       = 4.7618595
    init  nDCG = (2*0.6309298 + 1*0.4306766) / 4.7618595 = 1.6925361/4.7618595 = 0.355436 -> 0.35544
    best  nDCG = (2*1 + 1*0.6309298) / 4.7618595         = 2.6309298/4.7618595 = 0.552503 -> 0.55250
    best - init = 0.55250 - 0.35544 = 0.19706

The ideal answer is [2] > [4] > [1] > [3].
"""

import pytest

from rearank.methods.listwise.reward import compute_score, released_permutation

TRUTH = '{"labels": [0, 2, 0, 1], "pool": [3, 2, 1]}'
IDEAL = "[2] > [4] > [1] > [3]"
GAP = 0.55250 - 0.35544

CASES = [
    # (name, completion, ground truth, r_rank, format1, format2)
    ("clean ideal answer", f"<think>2 and 4 mention the answer.</think>\n<answer>{IDEAL}</answer>", TRUTH,
     1.0, 1, 1),  # rerank = best -> (0.55250 - 0.35544) / 0.19706 = 1
    ("ideal answer then text", f"<think>t</think><answer>{IDEAL}</answer> Hope this helps.", TRUTH,
     1.0, 0, 1),  # text after </answer>: not the whole completion -> format1 0
    ("leading whitespace", f"\n<think>t</think>\n<answer>{IDEAL}</answer>", TRUTH,
     1.0, 0, 1),  # a newline before <think>: format1 0
    ("duplicate ids", "<think>t</think><answer>[4] > [4] > [2]</answer>", TRUTH,
     # sigma = 4, 2, then missing 1, 3 -> labels [1, 2, 0, 0]: (1 + 2*0.6309298)/4.7618595 = 2.2618595/4.7618595
     # = 0.475000 -> 0.47500; r = (0.47500 - 0.35544) / 0.19706 = 0.11956 / 0.19706
     (0.47500 - 0.35544) / GAP, 1, 1),
    ("out-of-range ids", "<think>t</think><answer>[7] > [2] > [0] > [4] > [1] > [3]</answer>", TRUTH,
     1.0, 1, 1),  # 7 and 0 dropped -> 2, 4, 1, 3 = ideal; the chain is still there -> format2 1
    ("one id", "<think>t</think><answer>[2]</answer>", TRUTH,
     # sigma = 2, 1, 3, 4 -> labels [2, 0, 0, 1]: (2 + 0.4306766)/4.7618595 = 0.510449 -> 0.51045
     (0.51045 - 0.35544) / GAP, 1, 1),
    ("reversed ranking", "<think>t</think><answer>[4] > [3] > [2] > [1]</answer>", TRUTH,
     # labels [1, 0, 2, 0]: (1 + 2*0.5)/4.7618595 = 2/4.7618595 = 0.420000 -> 0.42000
     (0.42000 - 0.35544) / GAP, 1, 1),
    ("ids inside an unclosed think", "<think>[4] looks best, then [2], and", TRUTH,
     (0.47500 - 0.35544) / GAP, 0, 0),  # no answer block: digits of the whole text 4, 2 -> as "duplicate ids"
    ("bare chain without tags", "2 > 4 > 1 > 3", TRUTH,
     1.0, 0, 0),  # digits 2, 4, 1, 3 = ideal; no tags, no block
    ("two answer blocks", f"<think>t</think><answer>[4] > [3]</answer><answer>{IDEAL}</answer>", TRUTH,
     # the FIRST block counts: 4, 3, then 1, 2 -> labels [1, 0, 0, 2]: (1 + 2*0.4306766)/4.7618595
     # = 1.8613531/4.7618595 = 0.390888 -> 0.39089; the greedy whole-text pattern still matches -> format1 1
     (0.39089 - 0.35544) / GAP, 1, 1),
    ("upper-case tags", f"<THINK>t</THINK><ANSWER>{IDEAL}</ANSWER>", TRUTH,
     1.0, 0, 0),  # tags are case-sensitive: no block, digits of the whole text = ideal
    ("already ideal, answered wrongly", "<think>t</think><answer>[4] > [3] > [2] > [1]</answer>",
     '{"labels": [2, 1, 0, 0], "pool": [3, 2, 1]}',
     0.0, 1, 1),  # best == init (2.6309298/4.7618595 both) -> r_rank 0 whatever the answer
]


@pytest.mark.parametrize(("name", "text", "truth", "r_rank", "f1", "f2"), CASES, ids=[c[0] for c in CASES])
def test_released_variant_matches_hand_computed_scores(name, text, truth, r_rank, f1, f2):
    out = compute_score("rearank/dl21", text, truth, variant="released")
    assert out["r_rank"] == pytest.approx(r_rank, abs=1e-9)
    assert (out["format_tags"], out["format_answer"]) == (f1, f2)
    assert out["score"] == pytest.approx(0.8 * r_rank + 0.1 * f1 + 0.1 * f2, abs=1e-9)


def test_released_ndcg_is_normalised_by_the_pool_and_rounded():
    out = compute_score("d", f"<think>t</think><answer>{IDEAL}</answer>", TRUTH, variant="released")
    assert (out["init_ndcg"], out["ideal_ndcg"], out["ndcg"]) == (0.35544, 0.5525, 0.5525)
    # without a pool the set's own labels normalise: best = 1.0, init = 1.6925361/2.6309298 = 0.643322 -> 0.64332
    own = compute_score("d", "", '{"labels": [0, 2, 0, 1]}', variant="released")
    assert (own["init_ndcg"], own["ideal_ndcg"]) == (0.64332, 1.0)


def test_released_and_default_differ_where_documented():
    unclosed = "<think>[4] looks best, then [2], and"
    default = compute_score("d", unclosed, TRUTH)
    assert default["r_rank"] == 0.0  # rearank's parser: truncated inside <think>, presented order kept
    wrong = "<think>t</think><answer>[4] > [3] > [2] > [1]</answer>"
    ideal_truth = '{"labels": [2, 1, 0, 0]}'
    assert compute_score("d", wrong, ideal_truth)["r_rank"] == -1.0
    assert compute_score("d", wrong, ideal_truth, variant="released")["r_rank"] == 0.0


def test_released_permutation_reads_every_digit_run():
    assert released_permutation("<answer>Passage 3 beats 1; 3 again, 12</answer>", 4) == [2, 0, 1, 3]
    assert released_permutation("no digits", 3) == [0, 1, 2]


def test_bad_variant_options_raise():
    with pytest.raises(ValueError, match="variant"):
        compute_score("d", "", TRUTH, variant="paper")
    with pytest.raises(ValueError, match="normalized"):
        compute_score("d", "", TRUTH, variant="released", rank_reward="absolute")


@pytest.mark.parametrize(("text", "truth", "default", "released"), [
    (f"<think>t</think><answer>{IDEAL}</answer> Hope this helps.", TRUTH, 1.0, 0.9),  # released: format1 0
    (f"\n<think>t</think><answer>{IDEAL}</answer>", TRUTH, 1.0, 0.9),  # released: format1 0
    ("<think>t</think><answer>[7] > [2] > [0] > [4] > [1] > [3]</answer>", TRUTH, 0.9, 1.0),  # default: format2 0
    ("<think>[4] looks best, then [2], and", TRUTH, 0.0, 0.4854),  # 0.8 x 0.6067, as printed
    (f"<THINK>t</THINK><ANSWER>{IDEAL}</ANSWER>", TRUTH, 1.0, 0.8),  # released: case-sensitive tags
    ("<think>t</think><answer>[4] > [3] > [2] > [1]</answer>", '{"labels": [2, 1, 0, 0], "pool": [3, 2, 1]}',
     -0.6, 0.2),  # default: clipped r_rank -1; released: best == init -> 0
])
def test_the_side_by_side_table_of_docs_training(text, truth, default, released):
    """The rows of docs/training.md's "Where they differ" table, both columns."""
    assert compute_score("d", text, truth)["score"] == pytest.approx(default, abs=1e-9)
    assert compute_score("d", text, truth, variant="released")["score"] == pytest.approx(released, abs=5e-5)
