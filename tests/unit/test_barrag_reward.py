"""BAR-RAG rewards, parsers and filter rule: the issue's hand-computed values, the gate, reader failure, fuzzing."""

import asyncio
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rearank.methods.barrag import reward
from rearank.methods.barrag.parser import parse_generation, parse_selection
from rearank.methods.barrag.reader import ReaderError
from rearank.methods.barrag.reward import (
    boundary_term,
    compute_generator_score,
    compute_selector_score,
    count_penalty,
    selector_parts,
)
from rearank.rag.barrag.filtering import judge

DEAD = "http://127.0.0.1:9/v1"  # port 9 (discard): nothing listens, the connection is refused at once
TRUTH = json.dumps({
    "question": "Who?", "answers": ["Claudio Javier López"],
    "docs": [{"title": f"T{i}", "text": f"text {i}"} for i in range(1, 11)],
    "scores": [10.0] * 10,
})


@pytest.fixture(autouse=True)
def _fresh_truth_cache():
    # decode each test's ground truth afresh: mutation testing forks its runs from a process whose cache is filled
    reward.parse_answers_truth.cache_clear()
    reward.parse_selector_truth.cache_clear()


def selector(text, truth=TRUTH, **kwargs):
    return asyncio.run(compute_selector_score("d", text, truth, reader_url=DEAD, reader_retries=0, **kwargs))


@pytest.mark.parametrize(("p", "expected"), [(0.6, 1.0), (0.3, 0.5), (0.8, 0.5), (0.0, 0.0), (1.0, 0.0)])
def test_boundary_term(p, expected):
    # 0.3 / 0.6 = 0.5; (1 - 0.8) / 0.4 = 0.5; 0 / 0.6 = 0; (1 - 1) / 0.4 = 0
    assert boundary_term(p) == pytest.approx(expected)


@pytest.mark.parametrize(("n", "expected"), [(5, 0.0), (4, 0.5), (3, 1.0), (8, 1.0)])
def test_count_penalty(n, expected):
    # min(0.5 |n - 5|, 1): 0, 0.5, min(1, 1), min(1.5, 1)
    assert count_penalty(n) == expected


def test_selector_parts_at_the_peak():
    # boundary(0.6) = 1; s = 10 -> relevance 10 / (10 + 10) = 0.5, times 0.2 = 0.1; n = 5 -> no penalty: 1.1
    parts = selector_parts(5, [10.0] * 5, 0.6)
    assert parts["score"] == pytest.approx(1.1)
    assert parts["relevance"] == pytest.approx(0.5)


def test_relevance_normaliser_is_an_option_and_negatives_count_zero():
    # scores [0.8, -0.4] -> s = (0.8 + 0) / 2 = 0.4; norm 0.4 -> 0.4 / 0.8 = 0.5
    assert selector_parts(5, [0.8, -0.4], 0.6, rel_norm=0.4)["relevance"] == pytest.approx(0.5)


@pytest.mark.parametrize("text", [
    "<think>pick</think> [1], [2], [3], [4], [5]",  # no <answer>
    "<think>x</think><answer> [1], [2], [2], [4], [5] </answer>",  # repeated id
    "<think>x</think><answer> [11], [12] </answer>",  # no in-range id
    "<think>x</think><answer> none </answer>",
])
def test_gate_scores_zero_without_calling_the_reader(text):
    parts = selector(text)
    assert parts["score"] == 0.0 and parts["gate"] == 0.0 and parts["reader_failed"] == 0.0


def test_reader_failure_scores_minus_half_and_is_counted():
    before = reward.READER_FAILURES[f"{DEAD}/chat/completions"]
    parts = selector("<think>x</think><answer> [1], [3], [5], [7], [9] </answer>")
    assert parts["score"] == -0.5 and parts["reader_failed"] == 1.0
    assert reward.READER_FAILURES[f"{DEAD}/chat/completions"] == before + 1


def test_selector_score_from_reader_samples(monkeypatch):
    answers = ["<think>Doc [1] Doc [2]</think><answer>Claudio Javier López</answer>"] * 6 + ["<answer>no</answer>"] * 4
    calls = []

    async def fake_reader(url, model, messages, n, **kwargs):
        calls.append((n, kwargs["temperature"], messages[-1]["content"]))
        return answers

    monkeypatch.setattr(reward, "sample_reader", fake_reader)
    parts = selector("<think>x</think><answer> [2], [4], [6], [8] </answer>")
    # p = 6/10 (reward 1.0 >= 0.8; the others 0) -> boundary 1; relevance 10/20 = 0.5 -> 0.1; n = 4 -> penalty 0.5
    assert parts["p"] == pytest.approx(0.6) and parts["score"] == pytest.approx(1.0 + 0.1 - 0.5)
    [(n, temperature, prompt)] = calls
    assert n == 10 and temperature == 1.0  # K = 10 in one request, reader temperature 1.0
    assert "Doc [1]: (Title: T2) text 2" in prompt and "Doc [4]: (Title: T8) text 8" in prompt


def test_generator_reward_hand_computed():
    # "claudio lopez" vs "claudio javier lopez": common 2, P = 1, R = 2/3, F1 = 2 * (2/3) / (5/3) = 0.8; EM 0;
    # cite: Doc [1] and Doc [3] = 2 distinct -> 1; total 0.8 * (0.7 * 0.8 + 0.3 * 0) + 0.2 * 1 = 0.648
    parts = compute_generator_score("d", "<think>Doc [1] … Doc [3]</think><answer>Claudio López</answer>",
                                    json.dumps({"answers": ["Claudio Javier López"]}))
    assert parts["f1"] == pytest.approx(0.8) and parts["em"] == 0.0
    assert parts["score"] == pytest.approx(0.648)


@pytest.mark.parametrize(("think", "cite"), [("Doc [1]", 0.5), ("Doc [1] Doc [1] Doc [2]", 1.0),
                                             ("Doc [1] Doc [2] Doc [3]", 0.5), ("Doc [1] Doc [2] Doc [3] Doc [4]", 0.0),
                                             ("no docs", 0.0)])
def test_generator_cite_term(think, cite):
    parts = compute_generator_score("d", f"<think>{think}</think><answer>x</answer>", '{"answers": ["y"]}')
    assert parts["cite"] == cite and parts["score"] == pytest.approx(0.2 * cite)


def test_generator_without_answer_scores_zero():
    assert compute_generator_score("d", "<think>Doc [1] Doc [2]</think> Claudio", '["Claudio"]')["score"] == 0.0


def test_filter_keeps_varied_questions():
    # mean (0.2 + 0.4 + 0.6 + 0.8) * 2 / 8 = 0.5; variance (0.09 + 0.01 + 0.01 + 0.09) * 2 / 8 = 0.05
    verdict = judge([0.2, 0.4, 0.6, 0.8] * 2)
    assert verdict.keep and verdict.mean == pytest.approx(0.5) and verdict.variance == pytest.approx(0.05)


@pytest.mark.parametrize(("accuracies", "reason"), [
    ([0.5] * 8, "all_equal"),
    ([0.9, 1.0] * 4, "mean"),  # mean 0.95 > 0.85
    ([0.1, 0.2] * 4, "mean"),  # mean 0.15 < 0.25
    ([0.5, 0.6] * 4, "variance"),  # variance 0.0025 < 0.02
])
def test_filter_rejections(accuracies, reason):
    verdict = judge(accuracies)
    assert not verdict.keep and verdict.reason == reason


def test_selection_parser():
    parsed = parse_selection("<think>[9] maybe</think><answer> [3], [5], [30], [1] </answer>", 25)
    assert parsed.ids == (3, 5, 1) and parsed.n_out_of_range == 1 and parsed.valid
    assert not parse_selection("<answer>[3], [3]</answer>", 25).valid
    assert parse_generation("<think>Doc [2], doc[4]</think><answer> Paris </answer>") == ("Paris", frozenset({2, 4}))


def test_cited_ids_are_bounded_by_the_documents_shown():
    # the paper's case study (A.8): the generator reads 5 documents; "Doc [7]" names none of them, so only Doc [1]
    # is a citation (cite 0.5, not 1 for two documents), in the generator reward and in the selector's success rate
    text = "<think>Doc [1] names him; Doc [7] agrees.</think><answer>Claudio Javier López</answer>"
    assert parse_generation(text, n_docs=5).cited == {1} and parse_generation(text).cited == {1, 7}
    bounded = compute_generator_score("", text, json.dumps({"answers": ["Claudio Javier López"], "n_docs": 5}))
    assert bounded["cite"] == 0.5 and bounded["score"] == pytest.approx(0.8 + 0.2 * 0.5)
    assert compute_generator_score("", text, json.dumps({"answers": ["Claudio Javier López"], "n_docs": 7}))["cite"] == 1
    gold = reward.parse_answers_truth(json.dumps(["Claudio Javier López"]))
    assert reward.success_rate([text], gold, tau=0.95, n_docs=5) == 0.0  # 0.9 < tau once Doc [7] no longer counts
    assert reward.success_rate([text], gold, tau=0.95, n_docs=7) == 1.0
    assert compute_generator_score("", text, json.dumps({"answers": ["x"], "n_docs": -1}))["parse_status"] == 2.0


def test_bad_options_raise():
    with pytest.raises(ValueError, match="k_samples"):
        selector("x", k_samples=0)
    with pytest.raises(ValueError, match="needs a reader"):
        asyncio.run(compute_selector_score("d", "x", TRUTH))
    with pytest.raises(ValueError, match="cite_weight"):
        compute_generator_score("d", "x", "[]", cite_weight="a")


# ------------------------------------------------------------------------------------------- fuzzing

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["question", "answers", "docs", "scores", "title", "text", "x"]), inner, max_size=5),
    max_leaves=12,
)
ground_truths = json_values | json_values.map(json.dumps) | st.binary(max_size=40) | st.just(TRUTH)
completions = st.one_of(
    st.text(max_size=200),
    st.lists(st.sampled_from(["<think>", "</think>", "<answer>", "</answer>", "[1]", "[3]", "[99]", "Doc [2]",
                              ", ", "Claudio", "[0]", " "]), max_size=20).map("".join),
    st.none(), st.integers(),
)


@settings(deadline=None, max_examples=300)
@given(completions, ground_truths)
def test_generator_reward_never_raises(text, truth):
    parts = compute_generator_score("d", text, truth)
    assert 0.0 <= parts["score"] <= 1.0


@settings(deadline=None, max_examples=200)
@given(completions, ground_truths, st.lists(st.text(max_size=60), min_size=10, max_size=10) | st.none())
def test_selector_reward_never_raises(text, truth, reader_texts):
    async def fake_reader(url, model, messages, n, **kwargs):
        if reader_texts is None:
            raise ReaderError("down")
        return reader_texts

    original = reward.sample_reader
    reward.sample_reader = fake_reader
    try:
        parts = selector(text, truth)
    finally:
        reward.sample_reader = original
    assert -1.0 <= parts["score"] <= 1.2 and set(parts) == set(reward.SELECTOR_PARTS)


def test_select_for_rag_eval():
    from rearank.rag.barrag.select import select, selection_prompt
    from rearank.types import Passage, QAItem

    item = QAItem("q", "Who?", ("x",), tuple(Passage(f"p{i}", "", f"t{i}") for i in range(30)))
    assert "Doc [25]: t24" in selection_prompt(item)[-1]["content"] and "Doc [26]" not in selection_prompt(item)[-1]["content"]
    assert select(item, "<think/><answer> [3], [26], [1], [3] </answer>") == ["p2", "p0"]
    assert select(item, "no answer") == [] and select(item, "no answer", fallback_k=2) == ["p0", "p1"]
