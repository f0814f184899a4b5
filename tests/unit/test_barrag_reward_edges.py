"""BAR-RAG reward edges found by mutation testing: every part of both rewards, the options handed to the reader,
the shapes of ground truth accepted and refused."""

import asyncio
import logging
import math

import numpy as np
import pytest

from rearank.methods.barrag import reward
from rearank.methods.barrag.reader import ReaderError
from rearank.methods.barrag.reward import (
    compute_generator_score,
    compute_selector_score,
    relevance_term,
    selector_parts,
    success_rate,
)
from rearank.types import Passage

NAME = "Claudio Javier López"
DOCS = [{"title": f"T{i}", "text": f"text {i}"} for i in range(1, 7)]
TRUTH = {"question": "Who?", "answers": [NAME], "docs": DOCS, "scores": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]}
URL = "http://reader.test:1/v1"
TWO_CITES = f"<think>Doc [1] Doc [2]</think><answer>{NAME}</answer>"  # EM 1, F1 1, cite 1 -> 1.0
ONE_CITE = f"<think>Doc [1]</think><answer>{NAME}</answer>"  # cite 0.5 -> 0.8 + 0.1 = 0.9
CITES_1_3 = f"<think>Doc [1] Doc [3]</think><answer>{NAME}</answer>"  # 0.9 of 2 documents shown, 1.0 unbounded


@pytest.fixture(autouse=True)
def _fresh_truth_cache():
    reward.parse_answers_truth.cache_clear()
    reward.parse_selector_truth.cache_clear()


class FakeReader:
    """Stands in for the reader server: records each call, answers ``texts`` or raises ``error``."""

    def __init__(self, texts=(), error=None):
        self.texts, self.error, self.calls = list(texts), error, []

    async def __call__(self, url, model, messages, n, **kwargs):
        self.calls.append({"url": url, "model": model, "messages": messages, "n": n, **kwargs})
        if self.error:
            raise self.error
        return self.texts


def select(text, truth=TRUTH, **kwargs):
    kwargs.setdefault("reader_url", URL)
    return asyncio.run(compute_selector_score("d", text, truth, **kwargs))


def parts(**values):
    return {**dict.fromkeys(reward.SELECTOR_PARTS, 0.0), **values}


# ----------------------------------------------------------------------------------------------- generator


def test_generator_parts_without_an_answer_block():
    assert compute_generator_score("d", "<think>Doc [1] Doc [2]</think> x", {"answers": ["x"]}) == {
        "score": 0.0, "em": 0.0, "f1": 0.0, "cite": 0.0, "has_answer": 0.0, "parse_status": 1.0}


def test_generator_parts_of_a_full_answer():
    assert compute_generator_score("d", TWO_CITES, {"answers": [NAME]}) == {
        "score": pytest.approx(1.0), "em": 1.0, "f1": 1.0, "cite": 1.0, "has_answer": 1.0, "parse_status": 0.0}


def test_generator_weights_are_all_used():
    # 0.6 * (0.5 * F1 1 + 0.5 * EM 1) + 0.4 * cite 1 = 1.0 (the defaults give 0.8 * 1 + 0.2 * 1 = 1.0 too, so
    # each weight is changed: a weight left at its default would give 0.88, 1.2, 1.12 or 0.8)
    got = compute_generator_score("d", TWO_CITES, {"answers": [NAME]}, f1_weight=0.5, em_weight=0.5,
                                  answer_weight=0.6, cite_weight=0.4)
    assert got["score"] == pytest.approx(1.0)
    got = compute_generator_score("d", TWO_CITES, {"answers": [NAME]}, f1_weight=0.25, em_weight=0.5,
                                  answer_weight=0.4, cite_weight=0.1)
    assert got["score"] == pytest.approx(0.4 * 0.75 + 0.1)


@pytest.mark.parametrize("name", ["f1_weight", "em_weight", "answer_weight", "cite_weight"])
def test_generator_weights_must_be_finite_numbers(name):
    with pytest.raises(ValueError, match=f"option {name} must be a finite number"):
        compute_generator_score("d", TWO_CITES, {"answers": [NAME]}, **{name: math.inf})


@pytest.mark.parametrize("truth", [np.array(["x", NAME]), {"answers": np.array([NAME])}, {"answers": NAME}, NAME])
def test_generator_gold_answers_in_every_accepted_shape(truth):
    # a parquet row gives numpy arrays; a single answer may be a bare string
    assert compute_generator_score("d", TWO_CITES, truth if not isinstance(truth, str) else f'"{truth}"')["em"] == 1.0


@pytest.mark.parametrize("truth", [{"answers": []}, {"answers": {NAME: 1}}, {"answers": [NAME, 3]}, {"answers": 5},
                                   {"answers": [NAME], "n_docs": -1}, {"answers": [NAME], "n_docs": 2.0}])
def test_generator_malformed_ground_truth(truth):
    assert compute_generator_score("d", TWO_CITES, truth) == {
        "score": 0.0, "em": 0.0, "f1": 0.0, "cite": 0.0, "has_answer": 0.0, "parse_status": 2.0}


def test_generator_with_no_documents_shown_cites_none():
    got = compute_generator_score("d", TWO_CITES, {"answers": [NAME], "n_docs": 0})
    assert got["parse_status"] == 0.0 and got["cite"] == 0.0 and got["score"] == pytest.approx(0.8)


# ----------------------------------------------------------------------------------------------- terms


def test_relevance_term_defaults_and_edges():
    assert relevance_term([10.0]) == pytest.approx(0.5)  # 1 * 10 / (10 + 10)
    assert relevance_term([]) == 0.0
    assert relevance_term([0.0, -1.0], norm=0.0) == 0.0  # s + norm = 0: no division
    assert relevance_term([1.0], norm=-2.0) == 0.0


def test_selector_parts_uses_every_option():
    # boundary 0.3 / 0.5 = 0.6; relevance 2 * 10 / (10 + 10) = 1.0, times 0.4; bonus 0.25; n = target: no penalty
    assert selector_parts(3, [10.0], 0.3, max_rel=2.0, rel_norm=10.0, relevance_weight=0.4, bonus=0.25, target=3,
                          peak=0.5) == {
        "score": pytest.approx(0.6 + 0.4 + 0.25), "p": 0.3, "boundary": pytest.approx(0.6), "relevance": 1.0,
        "count_penalty": 0.0, "n_selected": 3.0, "reader_failed": 0.0, "gate": 1.0, "parse_status": 0.0}


# ----------------------------------------------------------------------------------------------- selector


def test_selector_passes_its_options_to_the_reader_and_the_terms(monkeypatch):
    fake = FakeReader([ONE_CITE, CITES_1_3, TWO_CITES])
    monkeypatch.setattr(reward, "sample_reader", fake)
    got = select("<answer>[2], [4]</answer>", reader_model="m", k_samples=3, temperature=0.5, tau=0.95,
                 max_rel=2.0, rel_norm=5.0, relevance_weight=0.5, bonus=0.25, target=2, reader_max_tokens=64,
                 timeout_s=5.0, reader_retries=0)
    [call] = fake.calls
    assert {k: v for k, v in call.items() if k != "messages"} == {
        "url": f"{URL}/chat/completions", "model": "m", "n": 3, "temperature": 0.5, "max_tokens": 64,
        "timeout_s": 5.0, "max_retries": 0}
    # only the last reaches tau 0.95: Doc [3] is no citation when 2 documents were shown -> p = 1/3
    # relevance: scores of ids 2 and 4 are 2 and 4, s = 3 -> 2 * 3 / (3 + 5) = 0.75
    boundary = (1 / 3) / 0.6
    assert got == parts(score=pytest.approx(boundary + 0.5 * 0.75 + 0.25), p=pytest.approx(1 / 3),
                        boundary=pytest.approx(boundary), relevance=pytest.approx(0.75), n_selected=2.0, gate=1.0)


def test_selector_reader_defaults(monkeypatch):
    fake = FakeReader([TWO_CITES])
    monkeypatch.setattr(reward, "sample_reader", fake)
    select("<answer>[1]</answer>")
    [call] = fake.calls
    assert {k: v for k, v in call.items() if k != "messages"} == {
        "url": f"{URL}/chat/completions", "model": "reader", "n": 10, "temperature": 1.0, "max_tokens": 1024,
        "timeout_s": 120.0, "max_retries": 3}


def test_selector_reader_from_verls_router(monkeypatch):
    fake = FakeReader([TWO_CITES])
    monkeypatch.setattr(reward, "sample_reader", fake)
    select("<answer>[1]</answer>", reader_url=None, reward_router_address="10.0.0.7:8123")
    assert fake.calls[0]["url"] == "http://10.0.0.7:8123/v1/chat/completions"


def test_selector_reader_failure_parts_and_log(monkeypatch, caplog):
    monkeypatch.setattr(reward, "sample_reader", FakeReader(error=ReaderError("boom")))
    before = reward.READER_FAILURES[f"{URL}/chat/completions"]
    with caplog.at_level(logging.WARNING, logger="rearank.rag.barrag"):
        got = select("<answer>[1], [2]</answer>", failure_score=-0.25)
    assert got == parts(score=-0.25, n_selected=2.0, reader_failed=1.0, gate=1.0)
    assert caplog.messages == [f"BAR-RAG selector reward: boom (failure {before + 1}, scored -0.25)"]


def test_selector_gate_and_bad_ground_truth_parts(monkeypatch):
    monkeypatch.setattr(reward, "sample_reader", FakeReader(error=AssertionError("the reader must not be asked")))
    assert select("<answer>[1], [1], [9]</answer>") == parts(n_selected=1.0, parse_status=1.0)
    assert select("<answer>[1]</answer>", truth={"answers": [NAME]}) == parts(parse_status=2.0)


@pytest.mark.parametrize("name", ["tau", "max_rel", "rel_norm", "relevance_weight", "bonus", "failure_score",
                                  "temperature", "timeout_s"])
def test_selector_numbers_must_be_finite(name):
    with pytest.raises(ValueError, match=f"option {name} must be a finite number"):
        select("<answer>[1]</answer>", **{name: math.nan})


@pytest.mark.parametrize(("name", "value"), [("k_samples", 0), ("k_samples", 2.5), ("k_samples", True),
                                             ("reader_retries", -1), ("reader_retries", 1.0)])
def test_selector_counts_must_be_integers(name, value):
    least = 1 if name == "k_samples" else 0
    with pytest.raises(ValueError, match=f"option {name} must be an integer >= {least}"):
        select("<answer>[1]</answer>", **{name: value})


def test_selector_one_sample_is_enough(monkeypatch):
    monkeypatch.setattr(reward, "sample_reader", FakeReader([TWO_CITES]))
    assert select("<answer>[1]</answer>", k_samples=1)["p"] == 1.0


# ------------------------------------------------------------------------------------------ ground truth


def test_selector_truth_record():
    truth = reward.parse_selector_truth({**TRUTH, "docs": [DOCS[0], {"text": "untitled"}], "scores": [1, 2.5]})
    assert truth.question == "Who?" and truth.answers == (NAME,)
    assert truth.docs == (Passage("1", "T1", "text 1"), Passage("2", "", "untitled"))
    assert truth.scores == (1.0, 2.5)


@pytest.mark.parametrize("change", [
    {"docs": [], "scores": []}, {"question": 5}, {"question": None}, {"scores": [1.0] * 5},
    {"scores": [1.0] * 5 + [math.nan]}, {"scores": [1.0] * 5 + [math.inf]}, {"scores": [1.0] * 5 + ["1"]},
    {"docs": DOCS[:5] + [{"title": "T", "text": 5}]}, {"docs": DOCS[:5] + [{"title": 5, "text": "t"}]},
    {"answers": []},
])
def test_selector_malformed_ground_truth(change):
    assert reward.parse_selector_truth({**TRUTH, **change}) is None


def test_success_rate_counts_a_reward_exactly_at_tau():
    gold = reward.parse_answers_truth({"answers": [NAME]})
    # EM 1, F1 1, no citation: 0.8 * 1 + 0.2 * 0 = 0.8, which reaches the default tau 0.8
    assert success_rate([f"<answer>{NAME}</answer>", "<answer>no</answer>"], gold) == 0.5
    assert success_rate([], gold) == 0.0
