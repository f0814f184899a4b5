"""The in-flight limit: fixed counts stay put; ``auto`` settles, on a simulated clock, where a simulated server
delivers the most tokens, or where its own metrics say it has room."""

import random

import pytest

from rearank.backends.base import ERROR, Generation
from rearank.backends.metrics import ServerLoad, parse_load
from rearank.engine.concurrency import InFlightLimit, parse_concurrency
from rearank.errors import RearankError

TOKENS = 100  # prompt + completion tokens of a simulated window (a fixed length)


def simulate(rate, answers=600, throttle_above=None, lengths=None, ready=None, slots=None, kv=None, start=8):
    """Drive an auto limit against a processor-sharing server on a simulated clock: with ``n`` windows running
    it delivers ``rate(n)`` tokens/s in all, shared equally, so short windows finish first. ``lengths`` draws
    each window's tokens (default: all ``TOKENS``). With ``throttle_above``, a window sent while more than that
    many were in flight is answered after a 429. ``ready``: the windows the queries can fill (the engine's
    report; default: unlimited). ``slots``: the server runs at most that many and holds the rest in a queue,
    and reports its load every second (``kv(running)``: its KV-cache use). Returns the final limit, the limits
    it went through and (time, limit) at every change."""
    clock = [0.0]
    limit = InFlightLimit(start=start, clock=lambda: clock[0])
    flight: list[list] = []  # [remaining tokens, tokens, ticket, crowd], in arrival order
    seen, changes = [limit.limit], [(0.0, limit.limit)]
    draw = lengths or (lambda: TOKENS)
    next_poll = 0.0 if slots else None

    def load():
        running = min(len(flight), slots)
        return ServerLoad(running, len(flight) - running, kv(running) if kv else None)

    done = 0
    while done < answers:
        if ready is not None:
            limit.available(ready)
        if next_poll is not None and clock[0] >= next_poll:
            limit.observe(load())
            next_poll = clock[0] + limit.poll_s
        while len(flight) < min(limit.limit, ready or limit.limit):
            tokens = draw()
            flight.append([float(tokens), tokens, limit.sent(), len(flight) + 1])
        active = flight[:slots] if slots else flight
        share = rate(len(active)) / len(active)
        first = min(active, key=lambda w: w[0])
        dt = first[0] / share
        if next_poll is not None and clock[0] + dt > next_poll:
            dt, first = next_poll - clock[0], None
        clock[0] += dt
        for window in active:
            window[0] -= dt * share
        if first is not None:
            flight.remove(first)
            _, tokens, ticket, crowd = first
            throttled = int(throttle_above is not None and crowd > throttle_above)
            limit.record(ticket, Generation("x", tokens // 2, tokens - tokens // 2, throttled=throttled))
            done += 1
        if limit.limit != seen[-1]:
            seen.append(limit.limit)
            changes.append((clock[0], limit.limit))
    return limit.limit, seen, changes


def reasoning_lengths(seed=0):
    """Window lengths spread like reasoning answers (100 to 2,000 tokens)."""
    draws = random.Random(seed)
    return lambda: draws.randint(100, 2000)


def test_a_server_where_concurrency_does_not_help_settles_low():
    final, seen, _ = simulate(lambda n: 1000.0)
    # one step up, no gain: halves while as good; then now and then one step up again
    assert seen[:5] == [8, 16, 4, 2, 1] and set(seen[4:]) == {1, 2} and final <= 2


def test_short_answers_coming_back_first_do_not_make_a_flat_server_look_faster():
    final, seen, _ = simulate(lambda n: 1000.0, answers=1500, lengths=reasoning_lengths())
    assert final <= 2 and max(seen) <= 16


def test_a_server_that_slows_down_with_concurrency_settles_at_one():
    final, seen, _ = simulate(lambda n: 1000.0 / (1 + 0.15 * (n - 1)), answers=1500, lengths=reasoning_lengths(1))
    # the step up costs throughput: straight to a quarter of 8, then halving
    assert final == 1 and seen[:4] == [8, 16, 2, 1]


def test_a_step_up_that_costs_throughput_goes_to_a_quarter_and_one_that_does_not_help_to_half():
    # each window slower than n-fold with n in flight: 16 is worse than 8, so 2 next (not 4, 2, 1 in turn)
    _, costs, _ = simulate(lambda n: 1000.0 / (1 + 0.5 * (n - 1)), answers=300)
    _, flat, _ = simulate(lambda n: 1000.0, answers=300)
    assert costs[:3] == [8, 16, 2] and flat[:3] == [8, 16, 4]


def test_a_batching_server_grows_the_count():
    final, seen, _ = simulate(lambda n: 1000.0 * n / (1 + 0.02 * n), answers=2000, lengths=reasoning_lengths(2))
    assert final >= 32 and seen[:3] == [8, 16, 32]


def test_decisions_take_a_few_window_latencies_not_a_count_of_answers():
    # windows of 10 s at one in flight: each decision comes about span (1) x the windows' latency later
    rate = lambda n: 10.0 * n / (1 + 0.02 * n)
    _, seen, changes = simulate(rate, answers=400)
    times = {count: t for t, count in reversed(changes)}
    latency_at = lambda n: TOKENS / (rate(n) / n)
    assert seen[:3] == [8, 16, 32]
    assert times[16] <= 1.5 * latency_at(8)
    assert times[32] - times[16] <= 1.5 * latency_at(16)


def _raised_with_one_window_left(clock):
    """Two in flight at 2: A (100 tokens, share 5) and B (120, share 6) give 20 tokens/s and a raise to 4 at
    t=12, while C, sent at t=10 beside B (share 1 before the raise), is still out; D, E, F are sent at the raise."""
    limit = InFlightLimit(start=2, clock=lambda: clock[0])
    a, b = limit.sent(), limit.sent()
    clock[0] = 10.0
    limit.record(a, Generation("x", 5, 100))
    c = limit.sent()
    clock[0] = 12.0
    limit.record(b, Generation("x", 5, 120))
    assert limit.history == [(2, 20.0)] and limit.limit == 4
    return limit, c, [limit.sent() for _ in range(3)]


def test_a_window_sent_before_a_raise_measures_the_new_count():
    # C answered at t=30 with 65 tokens: 20 of them at the rate before (share 1 x 20 tokens/s), 45 over its share
    # of 18 s at 4 in flight (4.5): 10 tokens/s at 4, half the best: dropped on this one answer, to a quarter
    clock = [0.0]
    limit, c, _ = _raised_with_one_window_left(clock)
    clock[0] = 30.0
    limit.record(c, Generation("x", 5, 65))
    assert limit.history == [(2, 20.0), (4, 10.0)] and limit.limit == 1


def test_one_answer_a_little_worse_waits_for_a_second():
    # 18 tokens/s at 4 (10% below the best): not far enough below to drop the step up on one answer
    clock = [0.0]
    limit, c, fresh = _raised_with_one_window_left(clock)
    clock[0] = 30.0
    limit.record(c, Generation("x", 5, 20 + 81))
    assert limit.history == [(2, 20.0)] and limit.limit == 4
    clock[0] = 32.0
    limit.record(fresh[0], Generation("x", 5, 80))  # sent at the raise: share 18 / 4 + 2 / 3 (C is back)
    assert limit.history[1] == (4, pytest.approx((101 - 20 + 80) / (4.5 + 18 / 4 + 2 / 3)))
    assert len(limit.history) == 2 and limit.limit == 1  # 16.7 tokens/s: worse than 20 by more than 10%


def test_windows_sent_before_a_step_down_do_not_measure_the_lower_count():
    # after the drop to 1, D, E and F (sent at 4) come back: the backlog of the higher count, not 1's rate
    clock = [0.0]
    limit, c, fresh = _raised_with_one_window_left(clock)
    clock[0] = 30.0
    limit.record(c, Generation("x", 5, 65))
    for window in fresh:  # mostly after the drop: they would count after a raise
        clock[0] += 100.0
        limit.record(window, Generation("x", 5, 500))
    assert limit.history == [(2, 20.0), (4, 10.0)] and limit.limit == 1


def test_a_rate_limited_server_stays_under_its_limit():
    final, seen, _ = simulate(lambda n: 1000.0 * n, answers=2000, throttle_above=4)
    assert final == 4 and max(seen) > 4  # it started above, was told 429, and came back under the limit


def test_a_429_as_it_comes_caps_the_count_at_what_the_server_held():
    limit = InFlightLimit(start=8, clock=lambda: 0.0)
    tickets = [limit.sent() for _ in range(8)]
    limit.turned_away(5)  # the server held 5 of ours when it refused one
    assert limit.limit == 5 and limit.cap == 5
    limit.turned_away(7)  # held more another time: no news
    assert limit.limit == 5
    limit.record(tickets[0], Generation("x", 5, 5))
    assert limit.limit == 5


def test_the_count_never_climbs_above_the_windows_the_queries_can_fill():
    # 3 queries with a window ready each on a batching server: no probe above them; one span at 1 (the server
    # might slow down with concurrency), worse, so all 3 go back in flight for good
    final, seen, _ = simulate(lambda n: 1000.0 * n / (1 + 0.02 * n), answers=300, ready=3)
    assert seen == [8, 1, 8] and final >= 3


def test_with_few_ready_windows_a_flat_server_goes_below_them():
    final, seen, _ = simulate(lambda n: 1000.0, answers=300, ready=3)
    assert seen[:3] == [8, 1, 2] and final <= 2


def test_server_metrics_raise_the_count_to_the_ready_windows_and_back_off_when_requests_queue():
    # a server that runs 16 sequences at once and queues the rest; 40 windows ready
    final, seen, _ = simulate(lambda n: 100.0 * n, answers=400, ready=40, slots=16, kv=lambda r: r / 64)
    assert seen[:2] == [8, 40] and final == 17  # what it runs, and one waiting


def test_one_request_waiting_behind_another_does_not_lower_the_count():
    # a server that prefills one request at a time (the other waits): both stay in flight, one queued
    final, seen, _ = simulate(lambda n: 100.0, answers=200, ready=2, slots=1, kv=lambda r: 0.1)
    assert seen == [8] and final == 8


def test_a_full_kv_cache_holds_the_count():
    final, seen, _ = simulate(lambda n: 100.0 * n, answers=200, ready=40, slots=64, kv=lambda r: 0.95)
    assert final == 8 and seen == [8]


def test_a_fixed_count_never_changes():
    limit = InFlightLimit(3)
    for _ in range(50):
        limit.record(limit.sent(), Generation("x", 5, 5, throttled=1))
    limit.observe(ServerLoad(0, 0, 0.0))
    limit.available(100)
    assert limit.limit == 3 and not limit.auto


def test_failed_windows_deliver_no_tokens():
    clock = [0.0]
    limit = InFlightLimit(start=1, clock=lambda: clock[0])
    for _ in range(10):
        ticket = limit.sent()
        clock[0] += 1.0
        limit.record(ticket, Generation("", 0, 0, finish_reason=ERROR))
    assert limit.history == [] and limit.limit == 1


@pytest.mark.parametrize("value", [0, -2, "fast", 1.5, True])
def test_bad_concurrency_is_a_clear_error(value):
    with pytest.raises(RearankError, match="concurrency must be 'auto' or a whole number"):
        parse_concurrency(value)


VLLM_PAGE = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="embedded"} 3.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="embedded"} 1.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="embedded"} 0.25
"""


def test_vllm_metrics_are_read():
    assert parse_load(VLLM_PAGE) == ServerLoad(3, 1, 0.25)
    older = VLLM_PAGE.replace("kv_cache_usage_perc", "gpu_cache_usage_perc")
    assert parse_load(older) == ServerLoad(3, 1, 0.25)


def test_sglang_metrics_are_read_and_label_sets_are_summed():
    page = ("sglang:num_running_reqs{tp_rank=\"0\"} 5\nsglang:num_running_reqs{tp_rank=\"1\"} 2\n"
            "sglang:num_queue_reqs{tp_rank=\"0\"} 0\nsglang:token_usage{tp_rank=\"0\"} 0.5\n"
            "sglang:token_usage{tp_rank=\"1\"} 0.75\n")
    assert parse_load(page) == ServerLoad(7, 0, 0.75)


@pytest.mark.parametrize("page", ["", "# just a comment\nother_metric 1\n", "<html>not found</html>",
                                  "vllm:num_requests_running{ 3\n"])
def test_a_page_without_load_gauges_is_no_load(page):
    assert parse_load(page) is None
