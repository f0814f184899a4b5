"""The in-flight limit's edges, on a clock the test moves: every decision's boundary (margins met exactly, the
ready windows, the cap), the state each leaves, the defaults a caller gets, and each change's log line word for
word. ``span`` makes the measured rate exact: ``n`` windows sent together and answered together ``n`` seconds
later each had exactly 1 of the server, so ``tokens`` completion tokens each measure ``tokens`` tokens/s."""

import logging
import time

import pytest

from rearank.backends.base import ERROR, Generation
from rearank.backends.metrics import ServerLoad
from rearank.engine.concurrency import InFlightLimit, parse_concurrency
from rearank.errors import RearankError
from tests.unit.test_concurrency import _raised_with_one_window_left


class Clocked:
    """An auto limit whose clock is ``now``."""

    def __init__(self, **options):
        self.now = 0.0
        self.limit = InFlightLimit(clock=lambda: self.now, **options)

    def span(self, tokens, rounds=4):
        """Rounds of ``limit`` windows (no more than the ready ones) sent now and answered ``limit`` seconds
        later, ``tokens`` completion tokens each, until a decision is taken; the limit after it."""
        decisions = len(self.limit.history)
        for _ in range(rounds):
            n = min(self.limit.limit, self.limit.ready)
            tickets = [self.limit.sent() for _ in range(n)]
            self.now += n
            for ticket in tickets:
                self.limit.record(ticket, Generation("x", 7, tokens))
            if len(self.limit.history) > decisions:
                return self.limit.limit
        raise AssertionError(f"no decision in {rounds} rounds at {self.limit.limit}")

    def spans(self, *rates):
        return [self.span(rate) for rate in rates]


def changes(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "rearank.engine.concurrency"]


@pytest.mark.parametrize("value", [1, 2, 64, "auto"])
def test_auto_and_whole_numbers_from_one_pass(value):
    assert parse_concurrency(value) == value


def test_the_refusal_names_the_value():
    with pytest.raises(RearankError) as err:
        parse_concurrency("fast")
    assert str(err.value) == "concurrency must be 'auto' or a whole number >= 1, got 'fast'"


def test_the_defaults_a_caller_gets():
    limit = InFlightLimit()
    assert (limit.limit, limit.cap, limit.ready, limit.best, limit.in_flight) == (8, 256, 256, 8, 0)
    assert (limit.margin, limit.span, limit.reprobe, limit.high_kv, limit.poll_s) == (0.1, 1.0, 8, 0.9, 1.0)
    assert limit.clock is time.perf_counter and limit.auto
    assert (limit.history, limit.load, limit.direction, limit.peak, limit.steady, limit.reported) == (
        [], None, "up", 0.0, 0, False)
    assert limit.room is None


@pytest.mark.parametrize(("options", "expected"), [
    ({"start": 300}, (256, 256)), ({"start": 0}, (1, 1)), ({"start": 5, "maximum": 3}, (3, 3)),
    ({"fixed": 4, "start": 2}, (4, 4)), ({"start": 1, "maximum": 1}, (1, 1)),
])
def test_the_start_is_between_one_and_the_maximum(options, expected):
    limit = InFlightLimit(**options)
    assert (limit.limit, limit.best) == expected


def test_a_flat_server_step_by_step_with_every_change_logged(caplog):
    caplog.set_level(logging.INFO, logger="rearank.engine.concurrency")
    run = Clocked()
    # 8: first figure, up; 16: not better (nor worse), half of 8; 4, 2: as good, halving; 1: settled there;
    # 8 spans settled at 1 (the default reprobe), then one step up, not better: back to the best
    assert run.spans(*[1500] * 14) == [16, 4, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1]
    assert changes(caplog) == [
        "concurrency 8 -> 16: 1,500 tokens/s at 8 in flight, best so far",
        "concurrency 16 -> 4: 1,500 tokens/s at 16 in flight, not better than 1,500 at 8; trying fewer",
        "concurrency 4 -> 2: 1,500 tokens/s at 4 in flight, as good as more; trying fewer",
        "concurrency 2 -> 1: 1,500 tokens/s at 2 in flight, as good as more; trying fewer",
        "concurrency 1 -> 2: 1,500 tokens/s at 1 in flight; trying one step up",
        "concurrency 2 -> 1: 1,500 tokens/s at 2 in flight, best 1,500 at 1; settled",
    ]
    assert run.limit.history == [(8, 1500.0), (16, 1500.0), (4, 1500.0), (2, 1500.0)] + [(1, 1500.0)] * 9 + [
        (2, 1500.0)]
    assert (run.limit.direction, run.limit.best, run.limit.steady) == ("settled", 1, 0)


def test_a_step_up_exactly_the_margin_better_is_not_better():
    run = Clocked(margin=0.25)  # 0.25: the bounds 125 and 75 of a peak of 100 are exact
    assert run.spans(100, 125) == [16, 4]
    assert (run.limit.direction, run.limit.peak, run.limit.best) == ("down", 100.0, 8)
    run = Clocked(margin=0.25)
    assert run.spans(100, 126) == [16, 32]
    assert (run.limit.direction, run.limit.peak, run.limit.best) == ("up", 126.0, 16)


def test_a_step_up_exactly_the_margin_worse_halves_and_below_it_quarters(caplog):
    caplog.set_level(logging.INFO, logger="rearank.engine.concurrency")
    run = Clocked(margin=0.25)
    assert run.spans(100, 75) == [16, 4]
    run = Clocked(margin=0.25)
    assert run.spans(100, 74) == [16, 2]
    assert changes(caplog)[-1] == "concurrency 16 -> 2: 74 tokens/s at 16 in flight, worse than 100 at 8; trying fewer"


def test_one_answer_twice_the_margin_worse_decides_at_once_and_one_at_the_bound_waits():
    for tokens, decided in [(50, False), (49, True)]:
        run = Clocked(margin=0.25)
        run.span(100)
        tickets = [run.limit.sent() for _ in range(16)]
        run.now += 16
        run.limit.record(tickets[0], Generation("x", 7, tokens))
        assert run.limit.history[1:] == ([(16, float(tokens))] if decided else [])


def test_going_down_a_count_exactly_the_margin_worse_is_as_good():
    run = Clocked(margin=0.25)
    assert run.spans(100, 100, 75) == [16, 4, 2]  # 75: as good as 100 within the margin
    assert (run.limit.direction, run.limit.peak, run.limit.best) == ("down", 100.0, 4)
    run = Clocked(margin=0.25)
    assert run.spans(100, 100, 74) == [16, 4, 8]  # worse: back to the best
    assert (run.limit.direction, run.limit.peak, run.limit.best, run.limit.steady) == ("settled", 100.0, 8, 0)


def test_going_down_a_better_count_is_the_new_peak():
    run = Clocked()
    assert run.spans(100, 100, 300) == [16, 4, 2]
    assert (run.limit.peak, run.limit.best) == (300.0, 4)


def test_the_settled_figure_is_the_latest_and_a_step_up_waits_for_reprobe_spans():
    run = Clocked(reprobe=2)
    assert run.spans(100, 100, 100, 100, 100) == [16, 4, 2, 1, 1]  # settled at 1
    assert run.spans(40) == [1] and (run.limit.peak, run.limit.steady) == (40.0, 1)
    assert run.spans(40) == [2] and (run.limit.direction, run.limit.steady) == ("up", 0)
    assert run.spans(60) == [4]  # 60 at 2 beats the settled 40 by more than the margin: better, up again
    assert (run.limit.peak, run.limit.best) == (60.0, 2)


def test_a_settled_count_with_no_more_ready_windows_stays():
    run = Clocked(reprobe=2)
    run.spans(100, 100, 100, 100, 100)
    run.limit.available(1)
    assert run.spans(100, 100, 100) == [1, 1, 1] and run.limit.steady == 3


def test_a_raise_stops_at_the_maximum_and_a_better_figure_there_settles():
    run = Clocked(maximum=12)
    assert run.spans(100, 200) == [12, 12]
    assert (run.limit.direction, run.limit.best, run.limit.peak) == ("settled", 12, 200.0)


def test_at_the_maximum_from_the_start_the_first_figure_tries_fewer(caplog):
    caplog.set_level(logging.INFO, logger="rearank.engine.concurrency")
    run = Clocked(maximum=8)
    run.limit.available(40)
    assert run.spans(100) == [4] and run.limit.direction == "down"
    assert changes(caplog) == [("concurrency 8 -> 4: 100 tokens/s at 8 in flight; no room above (ready windows: "
                                "40), trying fewer")]


@pytest.mark.parametrize(("ready", "after", "direction"), [(8, 4, "down"), (2, 1, "down"), (1, 8, "settled"),
                                                            (9, 16, "up")])
def test_the_first_figure_with_few_ready_windows(ready, after, direction):
    # as many ready as in flight: no room above, half of them; one ready: nothing to halve, settled
    run = Clocked()
    run.limit.available(ready)
    assert run.spans(100) == [after] and run.limit.direction == direction


def test_no_ready_window_counts_as_one():
    limit = InFlightLimit()
    limit.available(0)
    assert limit.ready == 1
    limit.available(5)
    assert limit.ready == 5


def test_an_answer_without_completion_tokens_counts_one():
    run = Clocked()
    assert run.spans(0) == [16] and run.limit.history == [(8, 1.0)]


def test_failed_and_throttled_answers_measure_nothing_but_leave_flight():
    run = Clocked()
    tickets = [run.limit.sent() for _ in range(3)]
    run.now += 3
    run.limit.record(tickets[0], Generation("", 0, 0, finish_reason=ERROR))
    run.limit.record(tickets[1], Generation("x", 7, 50, throttled=2))
    assert run.limit.in_flight == 1 and run.limit.history == []
    run.limit.record(tickets[2], Generation("x", 7, 50))
    run.limit.record(tickets[2], Generation("x", 7, 50))  # one answer too many: never below 0
    assert run.limit.in_flight == 0


def test_a_fixed_count_keeps_count_of_its_flight():
    limit = InFlightLimit(3)
    tickets = [limit.sent() for _ in range(3)]
    assert [t.crowd for t in tickets] == [1, 2, 3] and limit.in_flight == 3
    limit.record(tickets[0], Generation("x", 7, 5))
    assert limit.in_flight == 2 and limit.history == []
    limit.turned_away(1)
    assert limit.limit == 3 and limit.cap == 256 and limit.reported


def test_the_first_decision_waits_for_exactly_one_median_latency_of_two_answers():
    # two windows sent at 0, answered at 4 and 10: median latency 7; the decision comes at the answer at 10
    # (10 >= 7) and a single answer never decides (unless far worse than a peak)
    clock = [0.0]
    limit = InFlightLimit(start=2, clock=lambda: clock[0])
    a, b = limit.sent(), limit.sent()
    clock[0] = 4.0
    limit.record(a, Generation("x", 7, 40))  # share 2
    assert limit.history == []
    clock[0] = 10.0
    limit.record(b, Generation("x", 7, 80))  # share 2 + 6
    assert limit.history == [(2, 12.0)] and limit.limit == 4


def test_the_wait_counts_from_the_period_start_and_each_latency_from_its_sending():
    # the limit was made at 100, its windows sent at 106: 112 - 100 is less than 2.5 x the median latency of 6
    clock = [100.0]
    limit = InFlightLimit(start=3, clock=lambda: clock[0], span=2.5)
    clock[0] = 106.0
    a, b, c = limit.sent(), limit.sent(), limit.sent()
    clock[0] = 112.0
    limit.record(a, Generation("x", 7, 60))  # share 2, latency 6
    limit.record(b, Generation("x", 7, 60))  # share 2, latency 6
    assert limit.history == []
    clock[0] = 115.0
    limit.record(c, Generation("x", 7, 60))  # share 2 + 3, latency 9: median 6, and 115 - 100 is 2.5 x 6
    assert limit.history == [(3, 20.0)]


def test_windows_out_at_a_raise_from_the_server_metrics_are_not_measured_when_the_metrics_stop(caplog):
    caplog.set_level(logging.INFO, logger="rearank.engine.concurrency")
    run = Clocked()
    out = [run.limit.sent(), run.limit.sent()]
    run.now = 2.0
    run.limit.observe(ServerLoad(2, 0, 0.1))
    assert run.limit.limit == 256
    run.limit.observe(None)
    assert run.limit.load is None
    run.now = 4.0
    for ticket in out:  # no rate was measured before the raise to weigh their earlier tokens with
        run.limit.record(ticket, Generation("x", 7, 100))
    assert run.limit.history == [] and run.limit.in_flight == 0
    run.limit.available(4)
    assert run.span(100) == 2 and run.limit.history == [(256, 100.0)]
    assert changes(caplog) == [
        "concurrency 8 -> 256: nothing waits in the server (2 running, KV cache 10% used); 256 windows ready",
        "concurrency 256 -> 2: 100 tokens/s at 4 in flight; no room above (ready windows: 4), trying fewer"]


def test_a_429_caps_the_count_keeps_it_under_and_settles(caplog):
    caplog.set_level(logging.INFO, logger="rearank.engine.concurrency")
    run = Clocked(reprobe=2)
    run.spans(100, 100, 100)  # at 2, going down: best 4
    run.limit.turned_away(3)  # above the count: the count stays, the cap and the best come down
    assert (run.limit.limit, run.limit.cap, run.limit.best, run.limit.direction, run.limit.steady) == (
        2, 3, 3, "settled", 0)
    run.limit.turned_away(0)  # none of ours held: one
    assert (run.limit.limit, run.limit.cap, run.limit.best) == (1, 1, 1)
    assert changes(caplog)[-1] == "concurrency 2 -> 1: the server answered 429/503 while it held 0 of our requests"


def test_a_429_at_or_above_the_cap_is_no_news():
    limit = InFlightLimit(start=8, maximum=16)
    limit.turned_away(16)
    assert (limit.limit, limit.cap, limit.direction, limit.reported) == (8, 16, "up", True)


def test_a_settled_count_capped_by_a_429_restarts_its_reprobe_count():
    run = Clocked(reprobe=2)
    run.spans(100, 100, 100, 100, 100, 100)  # settled at 1 (best), one span since
    assert (run.limit.direction, run.limit.steady, run.limit.limit) == ("settled", 1, 1)
    run.limit.turned_away(5)
    assert run.limit.steady == 0
    assert run.spans(100, 100) == [1, 2]


def test_a_throttled_answer_caps_just_under_its_crowd_until_429s_come_as_they_arrive(caplog):
    caplog.set_level(logging.INFO, logger="rearank.engine.concurrency")
    limit = InFlightLimit(start=8, clock=lambda: 0.0)
    tickets = [limit.sent() for _ in range(6)]
    limit.record(tickets[4], Generation("x", 7, 5, throttled=1))  # sent fifth: 4 of ours were enough
    assert (limit.limit, limit.cap, limit.best, limit.direction) == (4, 4, 4, "settled")
    assert changes(caplog) == ["concurrency 8 -> 4: the server answered 429/503 (too busy) with 5 in flight"]
    limit.turned_away(3)
    assert limit.limit == 3 and limit.reported
    limit.record(tickets[1], Generation("x", 7, 5, throttled=1))  # crowd 2: no longer read
    assert (limit.limit, limit.cap) == (3, 3)


def test_a_fixed_count_ignores_429s():
    limit = InFlightLimit(4)
    limit.turned_away(1)
    limit.record(limit.sent(), Generation("x", 7, 5, throttled=1))
    assert (limit.limit, limit.cap, limit.best, limit.direction) == (4, 256, 4, "up")


def metrics(**options):
    """An auto limit with ``in_flight`` windows out (default 10) on a fixed clock."""
    flight = options.pop("in_flight", 10)
    limit = InFlightLimit(clock=lambda: 0.0, **options)
    for _ in range(flight):
        limit.sent()
    return limit


def test_requests_waiting_in_two_polls_lower_the_count_to_what_runs_and_one(caplog):
    caplog.set_level(logging.INFO, logger="rearank.engine.concurrency")
    limit = metrics(start=16)
    limit.observe(ServerLoad(9, 1))  # one waiting: no queue yet
    assert limit.limit == 16
    limit.observe(ServerLoad(8, 2))  # waited at the poll before (1), waits now (2)
    assert (limit.limit, limit.room) == (9, 9)
    for _ in range(31):
        limit.observe(ServerLoad(9, 0, 0.5))
    assert (limit.limit, limit.room) == (9, 9)
    assert changes(caplog) == ["concurrency 16 -> 9: 2 requests wait in the server's queue (8 running)"]


def test_a_queue_in_one_poll_only_or_of_one_request_lowers_nothing():
    limit = metrics(start=16)
    limit.observe(ServerLoad(6, 4))
    assert limit.limit == 16 and limit.room is None
    limit = metrics(start=16)
    for _ in range(3):
        limit.observe(ServerLoad(9, 1))
    assert limit.limit == 16 and limit.room is None
    limit = metrics(start=16)
    limit.available(16)
    limit.observe(ServerLoad(10, 0))  # nothing waited at the poll before
    limit.observe(ServerLoad(6, 4))
    assert limit.limit == 16 and limit.room is None


@pytest.mark.parametrize(("in_flight", "waiting", "after"), [(8, 4, 5), (2, 5, 1), (9, 4, 8)])
def test_a_queue_lowers_only_a_count_the_flight_does_not_exceed(in_flight, waiting, after):
    # 8 out of 8 with 4 waiting: 5; 2 out, 5 waiting (others' requests): never below 1; 9 out of 8: not ours
    limit = metrics(start=8, in_flight=in_flight)
    limit.observe(ServerLoad(in_flight - waiting, waiting))
    limit.observe(ServerLoad(in_flight - waiting, waiting))
    assert limit.limit == after


def test_a_queue_holds_the_count_down_for_four_reprobes_of_calm_polls():
    limit = metrics(start=16)
    limit.available(40)
    limit.observe(ServerLoad(8, 2))
    limit.observe(ServerLoad(8, 2))
    assert limit.limit == 9
    for _ in range(20):
        limit.observe(ServerLoad(9, 0, 0.5))
    limit.observe(ServerLoad(9, 1, 0.5))  # one waits again: the calm starts over
    for _ in range(31):
        limit.observe(ServerLoad(9, 0, 0.5))
    assert (limit.limit, limit.room) == (9, 9)
    limit.observe(ServerLoad(9, 0, 0.5))  # the 32nd calm poll (4 x reprobe 8)
    assert (limit.limit, limit.room) == (40, None)


def test_nothing_waiting_raises_to_the_ready_windows_under_the_cap(caplog):
    caplog.set_level(logging.INFO, logger="rearank.engine.concurrency")
    limit = metrics(start=8)
    limit.available(40)
    limit.turned_away(30)
    limit.observe(ServerLoad(10, 0))
    assert limit.limit == 30
    assert changes(caplog)[-1] == "concurrency 8 -> 30: nothing waits in the server (10 running); 40 windows ready"


def test_after_a_queue_and_a_429_below_it_calm_polls_keep_the_count_under_the_cap():
    limit = metrics(start=16)
    limit.available(40)
    limit.observe(ServerLoad(8, 2))
    limit.observe(ServerLoad(8, 2))
    assert (limit.limit, limit.room) == (9, 9)
    limit.turned_away(5)
    for _ in range(5):
        limit.observe(ServerLoad(5, 0, 0.1))
    assert (limit.limit, limit.cap, limit.room) == (5, 5, 9)


@pytest.mark.parametrize(("load", "after"), [
    (ServerLoad(10, 0, 0.9), 8), (ServerLoad(10, 0, 0.89), 40), (ServerLoad(10, 0, None), 40),
    (ServerLoad(10, 1, 0.1), 8),
])
def test_a_kv_cache_at_high_kv_or_a_request_waiting_holds_the_count(load, after):
    limit = metrics(start=8)
    limit.available(40)
    limit.observe(load)
    assert limit.limit == after


def test_the_ready_windows_at_the_count_raise_nothing():
    limit = metrics(start=8)
    limit.available(8)
    limit.observe(ServerLoad(8, 0, 0.1))
    assert limit.limit == 8 and limit.load == ServerLoad(8, 0, 0.1)


def test_a_window_out_at_a_decision_that_keeps_the_count_is_not_measured_after_it():
    run = Clocked(reprobe=8)
    run.spans(100, 100, 100, 100, 100)  # settled at 1
    a, b, c = run.limit.sent(), run.limit.sent(), run.limit.sent()
    run.now += 3
    run.limit.record(a, Generation("x", 7, 100))
    run.limit.record(b, Generation("x", 7, 100))  # a decision at 1 (steady): the count stays
    assert len(run.limit.history) == 6 and run.limit.limit == 1
    run.now += 2
    run.limit.record(c, Generation("x", 7, 300))  # out mostly after it, but no raise: its backlog is not 1's rate
    d = run.limit.sent()
    run.now += 1
    run.limit.record(d, Generation("x", 7, 100))  # the first answer of the new period: no decision yet
    assert len(run.limit.history) == 6


@pytest.mark.parametrize(("start", "rates", "limits"), [
    (5, [100, 100], [10, 2]),  # half of 5, in whole windows
    (6, [100, 100, 100], [12, 3, 1]),  # half of 3
    (1, [100, 100], [2, 1]),  # one step up from 1, not better: settled back at 1, nothing to halve
])
def test_halving_an_odd_count_gives_whole_windows(start, rates, limits):
    run = Clocked(start=start)
    assert run.spans(*rates) == limits and all(isinstance(n, int) for n in limits)
    assert run.limit.direction == ("settled" if start == 1 else "down")


def test_a_count_settled_above_one_steps_up_to_twice_itself(caplog):
    caplog.set_level(logging.INFO, logger="rearank.engine.concurrency")
    run = Clocked(reprobe=2)
    # 8, then 16 better, 32 not better on its third figure: settled at the best, 16; two spans later, 32
    assert run.spans(100, 200, 200, 200, 200) == [16, 32, 16, 16, 32]
    assert changes(caplog)[2:] == ["concurrency 32 -> 16: 200 tokens/s at 32 in flight, best 200 at 16; settled",
                                   "concurrency 16 -> 32: 200 tokens/s at 16 in flight; trying one step up"]


def test_metrics_at_the_count_between_two_answers_do_not_restart_the_measure():
    # a server whose metrics come and go: a poll that changes nothing keeps the answers measured so far
    run = Clocked()
    run.limit.available(8)
    tickets = [run.limit.sent() for _ in range(8)]
    run.now += 8
    run.limit.record(tickets[0], Generation("x", 7, 100))
    run.limit.observe(ServerLoad(7, 0, 0.1))  # ceiling: the 8 ready windows, the count already
    run.limit.observe(None)
    run.limit.record(tickets[1], Generation("x", 7, 100))
    assert run.limit.history == [(8, 100.0)]


def test_a_window_out_through_two_raises_is_not_measured():
    clock = [0.0]
    limit = InFlightLimit(start=2, clock=lambda: clock[0])
    a, b, x = limit.sent(), limit.sent(), limit.sent()
    clock[0] = 3.0
    limit.record(a, Generation("x", 7, 100))
    limit.record(b, Generation("x", 7, 100))  # 100 tokens/s at 2: up to 4
    c, d = limit.sent(), limit.sent()
    clock[0] = 6.0
    limit.record(c, Generation("x", 7, 200))
    limit.record(d, Generation("x", 7, 200))  # 200 at 4: up to 8
    assert limit.history == [(2, 100.0), (4, 200.0)] and limit.limit == 8
    clock[0] = 16.0
    limit.record(x, Generation("x", 7, 100))  # sent two counts ago: not a figure of 8 (it would be far worse)
    assert len(limit.history) == 2 and limit.limit == 8


def test_a_window_whose_share_after_a_raise_equals_its_share_before_measures_the_new_count():
    # C (sent at 10) had a share of 1 before the raise at 12 and has 1 after it at 16 (4 s at 4 in flight): it
    # counts, 40 - 20 x 1 tokens over 1; D's answer at 19 (share 2, latency 7) makes two: 60 / 3 at 4
    clock = [0.0]
    limit, c, fresh = _raised_with_one_window_left(clock)
    clock[0] = 16.0
    limit.record(c, Generation("x", 7, 40))
    clock[0] = 19.0
    limit.record(fresh[0], Generation("x", 7, 40))
    assert limit.history == [(2, 20.0), (4, 20.0)]


def test_tokens_all_owed_to_the_count_before_a_raise_measure_nothing_at_the_new_one():
    # C's 20 tokens are its share of 1 at the 20 tokens/s before the raise: 0 tokens/s at 4, far below the best
    clock = [0.0]
    limit, c, _ = _raised_with_one_window_left(clock)
    clock[0] = 16.0
    limit.record(c, Generation("x", 7, 20))
    assert limit.history == [(2, 20.0), (4, 0.0)] and limit.limit == 1
