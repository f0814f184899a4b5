"""McNemar's exact test and the query-flip randomization test (rearank.measures.significance), against binomial
tails and sign patterns counted by hand."""

import numpy as np
import pytest

from rearank.measures.significance import mcnemar_p, query_randomization_p


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


def test_query_flip_enumerates_every_sign_pattern_of_a_tiny_case():
    # per-query sums 2, 1, -1; of the 8 sign patterns, 6 give |sum| >= 2: (2+1-1, 2+1+1, 2-1+1 and their mirrors)
    a = np.array([0, 0, 0, 1, 0], dtype=float)
    b = np.array([1, 1, 1, 0, 0], dtype=float)
    assert query_randomization_p(a, b, ["q1", "q1", "q2", "q3", "q3"]) == pytest.approx(6 / 8)


def test_query_flip_treats_one_query_as_one_unit():
    a, b = np.zeros(10), np.ones(10)
    assert query_randomization_p(a, b, ["q"] * 10) == 1.0  # ten items, one query: +10 or -10, nothing to tell
    assert query_randomization_p(a, b, [f"q{i}" for i in range(10)]) == pytest.approx(2 / 2 ** 10)
    assert query_randomization_p(a, a, ["q"] * 10) == 1.0


def test_query_flip_samples_beyond_sixteen_queries():
    a, b = np.zeros(20), np.ones(20)
    p = query_randomization_p(a, b, list(range(20)), permutations=10000)
    assert 1 / 10001 <= p <= 3 / 10001  # exact: 2 / 2**20


def test_query_flip_refuses_labels_that_do_not_match_the_items():
    with pytest.raises(ValueError, match="2 group labels for 3 paired items"):
        query_randomization_p(np.zeros(3), np.ones(3), ["a", "b"])
