from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rearank.methods.listwise.window import schedule, window_count


def test_n100_gives_nine_windows_back_to_front():
    assert schedule(100, 20, 10) == [(80, 100), (70, 90), (60, 80), (50, 70), (40, 60), (30, 50), (20, 40), (10, 30), (0, 20)]


def test_small_and_edge_sizes():
    assert schedule(0) == []
    assert schedule(1) == [(0, 1)]
    assert schedule(20) == [(0, 20)]
    assert schedule(21) == [(1, 21), (0, 20)]
    assert schedule(105)[-2:] == [(5, 25), (0, 20)]
    assert schedule(30, passes=2) == [(10, 30), (0, 20)] * 2


@pytest.mark.parametrize("n", range(1, 251))
def test_schedule_pinned_for_n_1_to_250(n):
    wins = schedule(n, 20, 10)
    # every window inside [0, n], full width unless n < 20
    assert all(0 <= s < e <= n and e - s == min(20, n) for s, e in wins)
    # ends at rank 0 and starts at the bottom
    assert wins[-1][0] == 0 and wins[0][1] == n
    # consecutive windows overlap, so an item can bubble from the bottom to the top
    assert all(b[0] < a[0] and b[1] > a[0] for a, b in pairwise(wins))
    # the count: ceil((n - 20) / 10) + 1 windows for n > 20
    assert len(wins) == (1 if n <= 20 else -(-(n - 20) // 10) + 1)


@given(n=st.integers(0, 500), w=st.integers(1, 40), s=st.integers(1, 40), p=st.integers(0, 3))
def test_schedule_properties(n, w, s, p):
    if s > w:
        with pytest.raises(ValueError):
            schedule(n, w, s, p)
        return
    wins = schedule(n, w, s, p)
    if n == 0 or p == 0:
        assert wins == []
        return
    one = len(wins) // p
    assert wins == wins[:one] * p
    assert wins[one - 1][0] == 0
    covered = set()
    for a, b in wins[:one]:
        covered.update(range(a, b))
    assert covered == set(range(n))


def test_bad_arguments():
    with pytest.raises(ValueError):
        schedule(10, 0, 1)
    with pytest.raises(ValueError):
        schedule(10, 20, 30)


@pytest.mark.parametrize(("args", "message"), [
    ({"window": 0}, "need window >= 1, step >= 1, passes >= 0, n >= 0; got window=0, step=10, passes=1, n=5"),
    ({"step": 0}, "got window=20, step=0, passes=1, n=5"),
    ({"passes": -1}, "got window=20, step=10, passes=-1, n=5"),
    ({"n": -1}, "got window=20, step=10, passes=1, n=-1"),
    ({"step": 21}, "step (21) larger than window (20) would leave items never compared"),
])
def test_each_bad_argument_alone_is_named(args, message):
    with pytest.raises(ValueError) as err:
        schedule(**{"n": 5, **args})
    assert message in str(err.value)


def test_window_count_is_the_schedule_length_times_passes_over_the_top_k():
    assert window_count(100, 20, 10, 1, 100) == 9
    assert window_count(100, 20, 10, 3, 100) == 27
    assert window_count(100, 20, 10, 2, 30) == 2 * len(schedule(30, 20, 10))  # only the top_k are reranked
    assert window_count(25, 20, 10, 1, 100) == 2  # fewer candidates than top_k
    assert window_count(2, 20, 10, 1, 100) == 1  # two candidates: one window
    assert window_count(1, 20, 10, 4, 100) == 0 and window_count(0, 20, 10, 1, 100) == 0  # nothing to order
    assert window_count(50, 20, 10, 1, 1) == 0
