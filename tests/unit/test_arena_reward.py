"""ARENA reward and parser: the issue's hand-computed values, format rules, fuzzing."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rearank.methods.arena.parser import format_arena, parse_arena
from rearank.methods.arena.reward import PARTS, STYLE, compute_score, parse_ground_truth, relevance_accuracy

TRUTH = json.dumps({"answers": ["Claudio Javier López"], "supporting": [1, 5]})


@pytest.fixture(autouse=True)
def _fresh_truth_cache():
    # decode each test's ground truth afresh: mutation testing forks its runs from a process whose cache is filled
    parse_ground_truth.cache_clear()


def score(text, truth=TRUTH):
    return compute_score("d", text, truth)


@pytest.mark.parametrize(("relevance", "expected"), [("[5,1,1]", 1.0), ("[1]", 0.5), ("1,5", 0.0), ("[2, 3]", 0.0),
                                                     ("[1, 5, 7]", 0.5), ('["1", "5"]', 0.0), ("[]", 0.0)])
def test_relevance_against_gold_1_5(relevance, expected):
    # de-duplicated sorted [1, 5] equals gold -> 1; any overlap -> 0.5; not a JSON list of ints -> 0
    assert score(f"<relevance>{relevance}</relevance><analysis>a</analysis><answer>b</answer>")["relevance"] == expected


def test_all_three_terms_earn_the_bonus():
    # format 1 + accuracy 1 ("claudio javier lópez" after ARENA normalisation) + relevance 1 + bonus 10 = 13
    parts = score("<relevance>[1, 5]</relevance><analysis>Doc 1 and 5.</analysis><answer>claudio_javier lópez.</answer>")
    assert parts == {"score": 13.0, "format": 1.0, "accuracy": 1.0, "relevance": 1.0, "bonus": 10.0, "parse_status": 0.0}


@pytest.mark.parametrize("text", [
    "Sure. <relevance>[1, 5]</relevance><analysis>a</analysis><answer>Claudio Javier López</answer>",  # leading word
    "<relevance>[1, 5]</relevance><analysis>a</analysis><answer>x</answer><answer>y</answer>",  # a section twice
    "<relevance>[1, 5]</relevance><analysis>a <answer>b</analysis><answer>c</answer>",  # a tag inside a section
    "<analysis>a</analysis><relevance>[1, 5]</relevance><answer>Claudio Javier López</answer>",  # wrong order
    "<relevance>[1, 5]</relevance><analysis>a</analysis><answer>Claudio Javier López</answer> done",  # trailing
])
def test_format_failures(text):
    parts = score(text)
    assert parts["format"] == 0.0 and parts["bonus"] == 0.0
    assert parts["score"] == parts["accuracy"] + parts["relevance"]


def test_whitespace_between_tags_is_allowed():
    assert score("\n<relevance>[1,5]</relevance>\n<analysis>a</analysis>\n<answer>x</answer>\n")["format"] == 1.0


def test_format_follows_section_3_3_not_a_ban_on_angle_brackets():
    # ARENA §3.3: the three parts in order earn the format point; the paper's Table 1 output layout, with a '<'
    # and a newline inside the analysis, is well formed
    text = ("<relevance>[1,5]</relevance>\n<analysis>Reference 1 says the forward played for Valencia; "
            "reference 5 dates it: 1998 < 2000.</analysis>\n<answer>Claudio Javier López</answer>")
    assert parse_arena(text) == (True, (1, 5), "Claudio Javier López")
    assert score(text)["score"] == 13.0


def test_malformed_ground_truth_scores_zero():
    for truth in ("not json", '{"answers": []}', '{"answers": ["a"], "supporting": ["1"]}', b"\xff", None, 3):
        parts = score("<relevance>[1]</relevance><analysis>a</analysis><answer>a</answer>", truth)
        assert parts["score"] == 0.0 and parts["parse_status"] == 1.0


def test_parser_and_eval_accuracy():
    text = format_arena([5, 1], "because", "Paris")
    assert parse_arena(text) == (True, (1, 5), "Paris")
    # gold {1, 3}: predicted {1, 5}: 1 hit -> exact 0, overlap 1, precision 1/2, recall 1/2
    assert relevance_accuracy(text, [1, 3]) == {"relevance_exact": 0.0, "relevance_overlap": 1.0,
                                                "relevance_precision": 0.5, "relevance_recall": 0.5}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["answers", "supporting", "x"]),
                                                                inner, max_size=3),
    max_leaves=10,
)
completions = st.one_of(
    st.text(max_size=200),
    st.lists(st.sampled_from(["<relevance>", "</relevance>", "<analysis>", "</analysis>", "<answer>", "</answer>",
                              "[1,5]", "[1]", "1,5", "<", "Claudio Javier López", "[", "]", "9" * 5000]),
             max_size=15).map("".join),
    st.none(),
)


@settings(deadline=None, max_examples=400)
@given(completions, json_values | json_values.map(json.dumps) | st.binary(max_size=30) | st.just(TRUTH))
def test_never_raises(text, truth):
    parts = compute_score("d", text, truth)
    assert set(parts) == set(PARTS)
    assert parts["score"] in {0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 13.0}


def test_score_arena_for_rag_eval():
    from rearank.methods.arena.reading import arena_passages, arena_prompt, score_arena
    from rearank.types import Passage, QAItem

    item = QAItem("q", "Capital of France?", ("Paris",),
                  tuple(Passage(f"p{i}", f"T{i}", f"text {i}") for i in range(12)), frozenset({"p1", "p11"}), "hotpotqa")
    assert "\n10. T9: text 9" in arena_prompt(item)[-1]["content"] and "11." not in arena_prompt(item)[-1]["content"]
    # gold ids among the 10 shown: p1 -> 2 (p11 is cut off); cited [2, 3]: 1 hit of 2 cited, of 1 gold
    scores = score_arena(item, arena_passages(item), format_arena([3, 2], "x", "paris!"), style=STYLE)
    assert scores["pids"] == ["p1", "p2"] and scores["em"] == 1.0 and scores["format_ok"] == 1.0
    assert (scores["relevance_exact"], scores["relevance_precision"], scores["relevance_recall"]) == (0.0, 0.5, 1.0)
