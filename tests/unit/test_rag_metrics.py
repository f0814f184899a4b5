"""Answer metrics against hand-computed values."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rearank.measures.answers import (
    answer_recall,
    exact_match,
    has_answer,
    hit,
    normalize_answer,
    support_recall,
    token_f1,
)
from rearank.methods.arena.reward import STYLE as ARENA


def test_normalize_squad_and_arena():
    assert normalize_answer("The  Berlin-Wall, fell!") == "berlinwall fell"
    # arena (the style its card declares): only '_' becomes a space; '-' vanishes as in squad
    assert normalize_answer("The  Berlin-Wall_fell!", style=ARENA) == "berlinwall fell"
    assert normalize_answer("An apple a day") == "apple day"
    with pytest.raises(ValueError):
        normalize_answer("x", style="nope")
    with pytest.raises(ValueError):  # a name alone is no rule: the card's Style is
        normalize_answer("x", style="arena")


def test_berlin_wall_example():
    pred = "The Berlin Wall fell in 1989."
    assert exact_match(pred, ["1989"]) == 0.0
    # normalised prediction: berlin wall fell in 1989 (5 tokens); gold: 1989 (1 token); overlap 1
    # P = 1/5, R = 1/1, F1 = 2 * 0.2 * 1 / 1.2 = 1/3
    assert token_f1(pred, ["1989"]) == pytest.approx(1 / 3)
    assert hit(pred, ["1989"]) == 1.0


def test_max_over_gold_answers():
    # "Claudio López" vs "Claudio Javier López": 2 common, P = 2/2, R = 2/3, F1 = 2*(2/3)/(5/3) = 0.8
    assert token_f1("Claudio López", ["nobody", "Claudio Javier López"]) == pytest.approx(0.8)
    assert exact_match("the Cork", ["Dublin", "cork"]) == 1.0
    assert token_f1("x", []) == 0.0
    assert exact_match("x", "x") == 1.0  # a single string is one gold answer


def test_hit_is_whole_token():
    assert hit("yesterday", ["yes"]) == 0.0
    assert hit("Yes, it is.", ["yes"]) == 1.0
    assert hit("anything", [""]) == 0.0  # an empty gold answer never hits


def test_answer_recall_top_k():
    texts = ["nothing here", "It fell in 1989.", "1989 again"]
    assert answer_recall(texts, ["1989"], k=1) == 0.0
    assert answer_recall(texts, ["1989"], k=2) == 1.0
    assert answer_recall(texts, ["1990"], k=3) == 0.0


def test_support_recall():
    assert support_recall(["1", "2", "3"], {"2", "7"}) == 0.5
    assert support_recall([], {"2"}) == 0.0
    assert support_recall(["1"], set()) == 1.0


@settings(deadline=None, max_examples=100)
@given(st.text(max_size=30), st.lists(st.text(max_size=15), max_size=3))
def test_metric_ranges(pred, golds):
    em, f1, h = exact_match(pred, golds), token_f1(pred, golds), hit(pred, golds)
    assert 0.0 <= f1 <= 1.0 and em in (0.0, 1.0) and h in (0.0, 1.0)
    if em == 1.0 and normalize_answer(pred):
        assert f1 == 1.0 and h == 1.0


@pytest.mark.parametrize(("raw", "arena", "squad"), [
    ("The_Beatles", "beatles", "thebeatles"),          # App. C.1: '_' becomes a space (then 'the' is an article)
    ("U.S.", "us", "us"),                              # other punctuation is removed, not spaced
    ("Saint-Étienne", "saintétienne", "saintétienne"),
    ("  An   apple,  a day ", "apple day", "apple day"),  # articles dropped, whitespace collapsed
])
def test_arena_normalisation_is_appendix_c1(raw, arena, squad):
    assert normalize_answer(raw, ARENA) == arena
    assert normalize_answer(raw, "squad") == squad


def test_has_answer_is_dprs_rule():
    # DPR tokenises (DrQA's simple tokenizer, NFD, lower case) and matches token sequences: punctuation is a token
    assert has_answer("Released in 1989, it sold well.", ["1989"])
    assert not has_answer("in 19890 copies", ["1989"])
    assert has_answer("Cafe\u0301 de Flore", ["café de flore"])  # NFD makes both spellings one token sequence
    assert not has_answer("yesterday", ["yes"])
