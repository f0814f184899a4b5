"""The in-flight limit: fixed counts stay put; ``auto`` settles where a simulated server delivers the most tokens."""

import collections

import pytest

from rearank.backends.base import ERROR, Generation
from rearank.concurrency import InFlightLimit, parse_concurrency
from rearank.errors import RearankError

TOKENS = 100  # prompt + completion tokens of every simulated window


def simulate(rate, answers=600, throttle_above=None):
    """Drive an auto limit against a server that answers one window every ``TOKENS / rate(n)`` seconds while ``n``
    windows are in flight (oldest first). With ``throttle_above``, an answer to a request sent while more than that
    many were in flight reports a 429. Returns the limit and the limits it went through."""
    clock = [0.0]
    limit = InFlightLimit(clock=lambda: clock[0])
    flight: collections.deque = collections.deque()
    seen = [limit.limit]
    for _ in range(answers):
        while len(flight) < limit.limit:
            flight.append((limit.sent(), len(flight) + 1))
        clock[0] += TOKENS / rate(len(flight))
        epoch, crowd = flight.popleft()
        throttled = int(throttle_above is not None and crowd > throttle_above)
        limit.record(epoch, Generation("x", TOKENS - 10, 10, throttled=throttled))
        if limit.limit != seen[-1]:
            seen.append(limit.limit)
    return limit.limit, seen


def test_a_server_where_concurrency_does_not_help_settles_at_one():
    final, seen = simulate(lambda n: 1000.0)
    assert final == 1 and seen[:3] == [1, 2, 1]


def test_a_server_that_slows_down_with_concurrency_settles_at_one():
    final, _ = simulate(lambda n: 1000.0 / (1 + 0.15 * (n - 1)))
    assert final == 1


def test_a_batching_server_grows_the_count():
    final, seen = simulate(lambda n: 1000.0 * n / (1 + 0.02 * n), answers=2000)
    assert final >= 16 and seen[:4] == [1, 2, 4, 8]


def test_a_rate_limited_server_stays_under_its_limit():
    final, seen = simulate(lambda n: 1000.0 * n, answers=2000, throttle_above=4)
    assert final <= 4 and max(seen) > 4  # it tried more, was told 429, and came back under the limit


def test_a_fixed_count_never_changes():
    limit = InFlightLimit(3)
    for _ in range(50):
        limit.record(limit.sent(), Generation("x", 5, 5, throttled=1))
    assert limit.limit == 3 and not limit.auto


def test_failed_windows_deliver_no_tokens():
    clock = [0.0]
    limit = InFlightLimit(clock=lambda: clock[0])
    for _ in range(limit.epoch_windows(1)):
        epoch = limit.sent()
        clock[0] += 1.0
        limit.record(epoch, Generation("", 0, 0, finish_reason=ERROR))
    assert limit.history == [(1, 0.0)]


@pytest.mark.parametrize("value", [0, -2, "fast", 1.5, True])
def test_bad_concurrency_is_a_clear_error(value):
    with pytest.raises(RearankError, match="concurrency must be 'auto' or a whole number"):
        parse_concurrency(value)
