"""Edges of the answer metrics that mutation testing found untested (docs/testing.md)."""

from __future__ import annotations

import pytest

from rearank.measures.answers import exact_match, hit, normalize_answer, token_f1
from rearank.methods.arena.reward import STYLE as ARENA


@pytest.mark.parametrize(("prediction", "gold"), [("Berlin-Wall_fell", "berlinwall fell"),
                                                  ("berlinwall fell", "Berlin-Wall_fell")])
def test_the_style_normalises_both_the_prediction_and_the_gold(prediction, gold):
    """ARENA's normalisation turns _ into a space, SQuAD's drops it: the style must reach both sides."""
    assert exact_match(prediction, [gold], style=ARENA) == 1.0 and exact_match(prediction, [gold]) == 0.0
    assert hit(f"so {prediction} indeed", [gold], style=ARENA) == 1.0 and hit(f"so {prediction} indeed", [gold]) == 0.0
    assert token_f1(prediction, [gold], style=ARENA) == 1.0 and token_f1(prediction, [gold]) == 0.0


def test_a_single_gold_string_is_one_answer_not_its_letters():
    assert exact_match("Paris", "Paris") == 1.0
    assert exact_match("P", "Paris") == 0.0 and hit("a P", "Paris") == 0.0


def test_an_unknown_style_is_named():
    with pytest.raises(ValueError) as err:
        normalize_answer("x", style="trec")
    assert str(err.value) == "unknown normalisation style 'trec'; expected squad or a Style a method declares"
