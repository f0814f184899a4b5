"""Soak: over 1,000 requests through the openai backend and the driver against a server cycling through faults.

Every window is accounted for (an answer or an error, never lost), nothing raises, and the configured bounds
hold: attempts per window, the backoff cap, and the total deadline per attempt (each hanging or trickling reply
is abandoned by the deadline, not waited out). Bounds are checked by counting, not by the clock.
"""

from __future__ import annotations

import logging

import pytest

from rearank.backends.base import ERROR, SamplingSettings
from rearank.backends.openai import OpenAIBackend
from rearank.methods.listwise.answer import STATUSES
from rearank.methods.listwise.window import window_count
from rearank.types import Candidate, Query, Request
from tests.engines import listwise
from tests.fault_server import FAULTS, FaultServer

pytestmark = pytest.mark.slow
SENTINEL = "sk-sentinel-soak-3e4f5a6b7c8d"
MAX_RETRIES, MAX_BACKOFF, TIMEOUT = 2, 0.02, 0.5


def test_soak_every_window_accounted_and_bounds_respected(monkeypatch, caplog):
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    caplog.set_level(logging.INFO, logger="rearank.backends.openai")
    requests = [Request(Query(f"q{q}", f"query {q}"),
                        tuple(Candidate(f"d{q}_{c}", float(25 - c), f"passage {c}") for c in range(25)))
                for q in range(180)]
    windows = sum(window_count(25, 10, 5, 1, 100) for _ in requests)  # 180 x 4 = 720
    with FaultServer(cycle=[*FAULTS, "ok", "ok"], hang_s=5.0, echo=SENTINEL) as server:
        backend = OpenAIBackend("m", base_url=server.base_url, concurrency=8, timeout_s=TIMEOUT,
                                max_retries=MAX_RETRIES, backoff_s=0.005, max_backoff_s=MAX_BACKOFF,
                                max_response_bytes=64_000)
        waits: list[float] = []
        backend._sleep = waits.append  # backoff is counted, not slept: the waits requested are the bound to check
        attempts = []
        post = backend._post

        def counted(payload):
            attempts.append(1)
            return post(payload)

        backend._post = counted
        reranker = listwise(backend, window=10, step=5, batch_size=16, settings=SamplingSettings(max_new_tokens=64))
        results = reranker.rerank(requests, progress=False)
        served = dict(server.served)
    traces = [t for r in results for t in r.traces]
    assert server.requests >= 1000
    assert len(results) == len(requests) and len(traces) == windows
    assert all(sorted(c.docid for c in r.candidates) == sorted(c.docid for c in q.candidates)
               for r, q in zip(results, requests))
    statuses = {t.status for t in traces}
    assert statuses <= {*STATUSES, ERROR} and {"ok", ERROR} <= statuses
    # attempts: each window's first attempt plus one per backoff wait, at most 1 + MAX_RETRIES per window; the
    # server saw all but those that failed before it read them (a keep-alive connection it had closed)
    assert len(attempts) == windows + len(waits) <= windows * (1 + MAX_RETRIES)
    assert len(attempts) - 10 <= server.requests <= len(attempts)
    assert max(waits) <= MAX_BACKOFF
    # the deadline ended every hanging (5 s) or trickling (about 2 s) attempt; on a busy machine a few slow good
    # answers may miss it too, and are retried like any timeout
    deadline = f"no complete response within {TIMEOUT:g}s"
    assert served["hang"] + served["trickle"] <= sum(deadline in r.getMessage() for r in caplog.records)
    oversized = f"response larger than {64_000} bytes"
    assert sum(oversized in r.getMessage() for r in caplog.records) == served["oversized"]
    assert "Traceback" not in caplog.text and SENTINEL not in caplog.text
    assert all(SENTINEL not in t.raw_output for t in traces)
