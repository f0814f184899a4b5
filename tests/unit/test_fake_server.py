"""The fake server's service-time model and stats (simulated time only; no wall-clock assertions)."""

from __future__ import annotations

import httpx
import pytest

from rearank.testing.fake_server import (
    REASONING_MAX,
    REASONING_MIN,
    Engine,
    Sequence,
    ServiceModel,
    completion_length,
    passages,
    prompt_tokens,
    ranking,
    start,
)


def run_all(engine: Engine, horizon: float = 1e9) -> None:
    engine.advance(horizon)


def test_batching_step_cost_and_shared_steps():
    model = ServiceModel("batching", t0=1.0, alpha=0.5, prefill_s_per_token=0.0)
    engine = Engine(model)
    a, b = Sequence(prompt_tokens=10, tokens=4), Sequence(prompt_tokens=10, tokens=6)
    engine.submit(a, 0.0)
    engine.submit(b, 0.0)
    run_all(engine)
    # 4 steps with 2 running at 1 * (1 + 0.5 * 2) = 2 s each -> a done at 8 s;
    # then 2 steps with 1 running at 1.5 s -> b done at 8 + 3 = 11 s.
    assert a.finished == pytest.approx(8.0)
    assert b.finished == pytest.approx(11.0)
    stats = engine.stats.to_dict()
    assert stats["steps"] == 6
    assert stats["busy_s"] == pytest.approx(11.0)
    assert stats["occupancy"] == pytest.approx(1.0)
    # running-sequence integral: 2 * 8 + 1 * 3 = 19 over 11 s
    assert stats["mean_running"] == pytest.approx(19 / 11)
    assert (stats["prompt_tokens"], stats["completion_tokens"], stats["requests"]) == (20, 10, 2)


def test_flat_runs_one_at_a_time_and_prefill_stalls():
    model = ServiceModel("flat", t0=1.0, alpha=0.0, prefill_s_per_token=0.1)
    engine = Engine(model)
    a, b = Sequence(prompt_tokens=10, tokens=3), Sequence(prompt_tokens=20, tokens=2)
    engine.submit(a, 0.0)
    engine.submit(b, 0.0)
    assert len(engine.running) == 1 and len(engine.waiting) == 1
    run_all(engine)
    # a: prefill 10 * 0.1 = 1 s + 3 steps of 1 s -> 4 s; b: prefill 2 s + 2 steps -> 4 + 4 = 8 s
    assert a.finished == pytest.approx(4.0)
    assert b.finished == pytest.approx(8.0)
    assert engine.stats.max_running == 1


def test_degrading_throughput_falls_with_concurrency():
    model = ServiceModel("degrading", t0=1.0, beta=0.5)
    # tokens per second with b running: b / (b * (1 + 0.5 (b - 1))) = 1 / (1 + 0.5 (b - 1))
    rates = [b / model.step_time(b) for b in (1, 2, 4)]
    assert rates == pytest.approx([1.0, 1 / 1.5, 1 / 2.5])
    batching = ServiceModel("batching", t0=1.0, alpha=0.02)
    assert 8 / batching.step_time(8) == pytest.approx(8 / 1.16)


def test_idle_gap_lowers_occupancy():
    engine = Engine(ServiceModel("batching", t0=1.0, alpha=0.0, prefill_s_per_token=0.0))
    first, second = Sequence(1, 2), Sequence(1, 2)
    engine.submit(first, 0.0)  # busy 0-2
    engine.submit(second, 6.0)  # idle 2-6, busy 6-8
    run_all(engine)
    stats = engine.stats.to_dict()
    assert second.finished == pytest.approx(8.0)
    assert stats["occupancy"] == pytest.approx(4 / 8)
    assert stats["mean_running"] == pytest.approx(4 / 8)


def test_arrival_joins_at_step_boundary():
    engine = Engine(ServiceModel("batching", t0=1.0, alpha=0.0, prefill_s_per_token=0.0))
    a, b = Sequence(1, 5), Sequence(1, 2)
    engine.submit(a, 0.0)
    engine.submit(b, 2.5)  # a has had 2 whole steps; b shares steps 3 and 4
    run_all(engine)
    assert b.finished == pytest.approx(4.0)
    assert a.finished == pytest.approx(5.0)


def test_reasoning_lengths_are_seeded_and_spread():
    lengths = [completion_length("reasoning", str(i).encode(), 20) for i in range(2000)]
    assert lengths == [completion_length("reasoning", str(i).encode(), 20) for i in range(2000)]
    assert min(lengths) >= REASONING_MIN and max(lengths) <= REASONING_MAX
    assert min(lengths) < 200 and max(lengths) > 1500
    assert completion_length("answer", b"x", 20) == 82  # 4 * 20 + 2


def test_passages_ranking_and_prompt_tokens():
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"},
                {"role": "user", "content": "[1] grade 2 text"}, {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "[2] grade 9"}, {"role": "user", "content": "[3] no number"}]
    texts = passages(messages)
    assert texts == ["grade 2 text", "grade 9", "no number"]
    assert ranking(texts, "number") == [2, 1, 3]
    assert ranking(texts, "presented") == [1, 2, 3]
    inline = [{"role": "user", "content": "Rank:\n[1] a 1\n[2] b 5\nAnswer."}]
    assert ranking(passages(inline), "number") == [2, 1]
    # ceil(1/4)+4 + ceil(4/4)+4 + ceil(16/4)+4 + ceil(2/4)+4 + ceil(11/4)+4 + ceil(13/4)+4 = 5+5+8+5+7+8
    assert prompt_tokens(messages) == 38


def test_stats_route_rate_limit_and_bad_body():
    server = start("batching", time_scale=1e6, lengths="answer", max_in_flight=0, retry_after_s=3)
    try:
        base = server.base_url.removesuffix("/v1")
        reply = httpx.post(f"{server.base_url}/chat/completions", json={"messages": []})
        assert reply.status_code == 429 and reply.headers["Retry-After"] == "3"
        assert httpx.post(f"{server.base_url}/chat/completions", content=b"{").status_code == 400
        server.max_in_flight = None
        bad = httpx.post(f"{server.base_url}/chat/completions", json={"messages": [], "max_tokens": "many"})
        assert bad.status_code == 400 and "max_tokens" in bad.json()["error"]["message"]
        stats = httpx.get(f"{base}/stats").json()
        assert (stats["rejected"], stats["requests"]) == (1, 0)
    finally:
        server.shutdown()
        server.server_close()
