"""Run statistics figure by figure on a fake clock: counts, per-query ratios, rates, every parse status listed, the
summary line and the JSON written."""

from __future__ import annotations

import json

import pytest

from rearank.run import stats as run_stats
from rearank.run.stats import RunStats
from rearank.types import Query, Result, WindowTrace


def trace(prompt, completion, status="ok", rnd=0, hit=False, error=""):
    return WindowTrace(qid="q", start=0, end=2, pass_index=0, prompt_tokens=prompt, completion_tokens=completion,
                       raw_output="", permutation=(0, 1), status=status, latency_s=0.0, think_budget_hit=hit, round=rnd,
                       **({"error": error} if error else {}))


@pytest.fixture
def clock(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(run_stats.time, "perf_counter", lambda: now[0])
    return now


def three_queries(clock):
    stats = RunStats(started=100.0, earlier_s=0.25)  # a quarter second before a resume
    # q1: rounds 0, 0, 1 -> 3 calls in 2 rounds
    stats.add_traces([trace(10, 5), trace(20, 6, rnd=0), trace(30, 7, "missing_ids", rnd=1, hit=True)])
    stats.add_traces([])  # q2: nothing to rerank -> no call, no round
    # q3 through its result: rounds 0 and 1 -> 2 calls in 2 rounds; two statuses rearank does not know
    stats.add(Result(Query("q3", "t"), (), (trace(15, 4, "zz"), trace(25, 8, "aa", rnd=1, hit=True))))
    clock[0] = 100.25  # wall: 0.25 s now + 0.25 s before = 0.5 s
    return stats


def test_counts_ratios_and_rates(clock):
    figures = three_queries(clock).to_dict()
    assert figures == {
        "queries": 3, "calls": 5, "prompt_tokens": 100, "completion_tokens": 30, "rounds": 4,
        "calls_per_query": 5 / 3, "rounds_per_query": 4 / 3, "prompt_tokens_per_query": 100 / 3,
        "completion_tokens_per_query": 10.0,
        "status_counts": {"ok": 2, "missing_ids": 1, "repetition": 0, "out_of_range": 0, "wrong_format": 0,
                          "truncated": 0, "aa": 1, "zz": 1},
        "think_budget_hits": 2, "failed_calls": 0, "first_error": "", "wall_time_s": 0.5, "queries_per_s": 6.0, "completion_tokens_per_s": 60.0}
    assert list(figures["status_counts"]) == ["ok", "missing_ids", "repetition", "out_of_range", "wrong_format",
                                              "truncated", "aa", "zz"]  # best first, then unknown ones sorted


def test_the_summary_names_the_statuses_seen_other_than_ok(clock):
    assert three_queries(clock).summary() == (
        "3 queries, 5 windows (1.7 per query in 1.3 sequential rounds), 100 prompt + 30 completion tokens, 0.5s "
        "(6.000 queries/s); parse: 2 ok, 1 missing_ids, 1 aa, 1 zz")


def test_no_time_and_no_query_give_zeros_not_a_division_error(clock):
    stats = RunStats(started=100.0)
    figures = stats.to_dict()
    assert (figures["wall_time_s"], figures["queries_per_s"], figures["completion_tokens_per_s"]) == (0.0, 0.0, 0.0)
    assert (figures["calls_per_query"], figures["rounds_per_query"]) == (0.0, 0.0)
    assert figures["status_counts"] == {"ok": 0, "missing_ids": 0, "repetition": 0, "out_of_range": 0,
                                        "wrong_format": 0, "truncated": 0}
    assert stats.summary() == ("0 queries, 0 windows (0.0 per query in 0.0 sequential rounds), 0 prompt + 0 "
                               "completion tokens, 0.0s (0.000 queries/s); parse: 0 ok")
    clock[0] = 102.0
    stats.restart()  # the clock starts again: the 2 s before are not counted
    clock[0] = 103.0
    assert stats.to_dict()["wall_time_s"] == 1.0


def test_write_puts_the_figures_and_the_extra_entries_in_one_json_file(clock, tmp_path):
    stats = three_queries(clock)
    path = tmp_path / "stats.json"
    stats.write(path, {"config": {"backend": "oracle"}})
    text = path.read_text()
    assert text.endswith("}\n") and text.startswith('{\n  "queries": 3,\n')
    assert json.loads(text) == {**stats.to_dict(), "config": {"backend": "oracle"}}
    stats.write(path)
    assert json.loads(path.read_text()) == stats.to_dict()


def test_one_query_is_its_own_average(clock):
    stats = RunStats(started=100.0)
    stats.add_traces([trace(10, 5), trace(20, 7, rnd=1), trace(30, 9, rnd=2)])
    figures = stats.to_dict()
    assert (figures["calls_per_query"], figures["rounds_per_query"], figures["prompt_tokens_per_query"],
            figures["completion_tokens_per_query"]) == (3.0, 3.0, 60.0, 21.0)


def test_one_query_and_one_window_are_singular_and_rounds_are_per_query(clock):
    # a batched run of 43 queries x 9 windows read "387 LLM calls in 387 sequential rounds" and "1 queries"
    one = RunStats(started=100.0)
    one.add_traces([trace(1, 1)])
    assert one.summary().startswith("1 query, 1 window (1.0 per query in 1.0 sequential rounds),")
    many = RunStats(started=100.0)
    for _ in range(43):
        many.add_traces([trace(1, 1, rnd=r) for r in range(9)])
    assert many.summary().startswith("43 queries, 387 windows (9.0 per query in 9.0 sequential rounds),")


REFUSED = "request to http://127.0.0.1:1/v1/chat/completions failed (connection refused)"


def test_failed_calls_are_counted_with_the_first_cause(clock):
    stats = RunStats(started=100.0)
    stats.add_traces([trace(10, 5), trace(0, 0, "error", error=REFUSED), trace(0, 0, "error", error="later")])
    figures = stats.to_dict()
    assert (figures["failed_calls"], figures["first_error"], figures["status_counts"]["error"]) == (2, REFUSED, 2)
    assert stats.summary().endswith("parse: 1 ok; 2 of 3 model calls failed")


@pytest.mark.parametrize(("failed", "share", "fails"), [
    (3, 1.0, True), (2, 1.0, False), (0, 1.0, False), (1, 0.0, True), (0, 0.0, False), (2, 0.5, True), (1, 0.5, False),
])
def test_the_run_is_a_failure_when_the_share_of_failed_calls_is_reached(clock, failed, share, fails):
    stats = RunStats(started=100.0)
    stats.add_traces([trace(0, 0, "error", error=REFUSED) for _ in range(failed)]
                     + [trace(1, 1) for _ in range(3 - failed)])
    message = stats.failure(share)
    assert (message is not None) == fails
    if fails:
        which = "all 3" if failed == 3 else f"{failed} of 3"
        assert message == (f"{which} model calls failed (first: {REFUSED}); their windows kept the input order: "
                           "fix the cause and rerun with --resume to retry them")
