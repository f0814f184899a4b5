"""The in-flight limit: fixed counts stay put; ``auto`` settles where a simulated server delivers the most tokens."""

import random

import pytest

from rearank.backends.base import ERROR, Generation
from rearank.concurrency import InFlightLimit, parse_concurrency
from rearank.errors import RearankError

TOKENS = 100  # prompt + completion tokens of a simulated window (a fixed length)


def simulate(rate, answers=600, throttle_above=None, lengths=None):
    """Drive an auto limit against a processor-sharing server: with ``n`` windows in flight it delivers
    ``rate(n)`` tokens/s in all, shared equally, so short windows finish first. ``lengths`` draws each window's
    tokens (default: all ``TOKENS``). With ``throttle_above``, a window sent while more than that many were in
    flight is answered after a 429. Returns the final limit and the limits it went through."""
    clock = [0.0]
    limit = InFlightLimit(clock=lambda: clock[0])
    flight: list[list] = []  # [remaining tokens, tokens, ticket, crowd]
    seen = [limit.limit]
    draw = lengths or (lambda: TOKENS)
    for _ in range(answers):
        while len(flight) < limit.limit:
            tokens = draw()
            flight.append([float(tokens), tokens, limit.sent(), len(flight) + 1])
        share = rate(len(flight)) / len(flight)
        first = min(flight, key=lambda w: w[0])
        step = first[0]
        clock[0] += step / share
        for window in flight:
            window[0] -= step
        flight = [w for w in flight if w is not first]
        _, tokens, ticket, crowd = first
        throttled = int(throttle_above is not None and crowd > throttle_above)
        limit.record(ticket, Generation("x", tokens // 2, tokens - tokens // 2, throttled=throttled))
        if limit.limit != seen[-1]:
            seen.append(limit.limit)
    return limit.limit, seen


def reasoning_lengths(seed=0):
    """Window lengths spread like reasoning answers (100 to 2,000 tokens)."""
    draws = random.Random(seed)
    return lambda: draws.randint(100, 2000)


def test_a_server_where_concurrency_does_not_help_settles_at_one():
    final, seen = simulate(lambda n: 1000.0)
    assert final == 1 and seen[:3] == [1, 2, 1]


def test_short_answers_coming_back_first_do_not_make_a_flat_server_look_faster():
    final, seen = simulate(lambda n: 1000.0, answers=1500, lengths=reasoning_lengths())
    assert final == 1 and max(seen) <= 2


def test_a_server_that_slows_down_with_concurrency_settles_at_one():
    final, seen = simulate(lambda n: 1000.0 / (1 + 0.15 * (n - 1)), answers=1500, lengths=reasoning_lengths(1))
    assert final == 1 and max(seen) <= 2


def test_a_batching_server_grows_the_count():
    final, seen = simulate(lambda n: 1000.0 * n / (1 + 0.02 * n), answers=2000, lengths=reasoning_lengths(2))
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
