"""RBO's and average overlap's edges by hand: the default persistence, its bounds, rankings of other lengths."""

from __future__ import annotations

import pytest

from rearank.measures.rbo import average_overlap, rbo


def test_rbo_by_hand_and_its_default_persistence():
    # k = 2, X_1 = 0, X_2 = 2, p = 0.5: (2/2) 0.25 + (0.5/0.5) (0/1 * 0.5 + 2/2 * 0.25) = 0.5
    assert rbo([1, 2], [2, 1], 0.5) == pytest.approx(0.5, abs=1e-12)
    # p = 0.9: (2/2) 0.81 + (0.1/0.9) (0 + 2/2 * 0.81) = 0.81 + 0.09 = 0.9
    assert rbo([1, 2], [2, 1]) == pytest.approx(0.9, abs=1e-12)
    assert rbo([], []) == 1.0


@pytest.mark.parametrize("p", [0.0, 1.0, 1.5, -0.1])
def test_persistence_outside_the_open_unit_interval_is_refused(p):
    with pytest.raises(ValueError) as err:
        rbo([1], [1], p)
    assert str(err.value) == f"RBO persistence p must be in (0, 1), got {p}"


def test_rankings_of_other_lengths_are_refused():
    with pytest.raises(ValueError) as err:
        rbo([1, 2, 3], [1, 2])
    assert str(err.value) == "RBO needs equally long rankings, got 3 and 2"


@pytest.mark.parametrize(("ranking", "reference", "expected"), [
    ([1, 2, 3], [2, 1, 4], (0 / 1 + 2 / 2 + 2 / 3) / 3),  # X_1 = 0, X_2 = 2, X_3 = 2: 5/9
    ([1, 2, 3, 4], [2, 1], (0 / 1 + 2 / 2) / 2),  # the depth of the shorter one
    ([2, 1], [1, 2, 3, 4], (0 / 1 + 2 / 2) / 2),
    (["a"], ["a"], 1.0),
    ([], [], 1.0),
    ([1], [], 0.0),
    ([], [1], 0.0),
])
def test_average_overlap_by_hand(ranking, reference, expected):
    assert average_overlap(ranking, reference) == pytest.approx(expected, abs=1e-12)
