"""McNemar's exact test (rearank.measures.significance.mcnemar_p), against binomial tails computed by hand."""

import numpy as np
import pytest

from rearank.measures.significance import mcnemar_p


def pairs(both: int, only_a: int, only_b: int, neither: int) -> tuple[np.ndarray, np.ndarray]:
    a = [True] * both + [True] * only_a + [False] * only_b + [False] * neither
    b = [True] * both + [False] * only_a + [True] * only_b + [False] * neither
    return np.array(a), np.array(b)


def test_six_discordant_pairs_all_one_way():
    assert mcnemar_p(*pairs(10, 0, 6, 4)) == pytest.approx(2 / 64)  # 2 * 0.5**6


def test_one_against_five_and_its_mirror():
    assert mcnemar_p(*pairs(3, 1, 5, 2)) == pytest.approx(2 * 7 / 64)  # 2 * (C(6,0) + C(6,1)) / 2**6
    assert mcnemar_p(*pairs(3, 5, 1, 2)) == pytest.approx(2 * 7 / 64)


def test_balanced_or_no_discordant_pairs_give_one():
    assert mcnemar_p(*pairs(5, 3, 3, 5)) == 1.0
    assert mcnemar_p(*pairs(5, 0, 0, 5)) == 1.0


def test_concordant_pairs_do_not_count():
    assert mcnemar_p(*pairs(0, 0, 6, 0)) == mcnemar_p(*pairs(90, 0, 6, 90))
