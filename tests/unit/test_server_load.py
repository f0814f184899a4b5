"""What the openai backend tells the in-flight controller: the server's load from ``/metrics`` and its 429/503s as
they come; and ``auto`` against the fake rate-limited server, end to end."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from rearank.api import Reranker
from rearank.backends.base import Prompt, SamplingSettings
from rearank.backends.metrics import ServerLoad
from rearank.backends.openai import OpenAIBackend
from rearank.testing.fake_server import start
from tests.unit.test_concurrency import VLLM_PAGE
from tests.unit.test_engine_in_flight import requests


class _Metrics(BaseHTTPRequestHandler):
    def do_GET(self):
        body = VLLM_PAGE.encode() if self.path == "/metrics" else b"not found"
        self.send_response(200 if self.path == "/metrics" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_the_load_is_read_from_a_vllm_metrics_page():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        backend = OpenAIBackend("m", base_url=f"http://127.0.0.1:{server.server_address[1]}/v1")
        assert backend.server_load() == ServerLoad(3, 1, 0.25)
        backend.close()
    finally:
        server.shutdown()
        server.server_close()


def test_a_server_without_metrics_or_not_answering_has_no_load():
    fake = start("batching", time_scale=1000.0)
    try:
        backend = OpenAIBackend("m", base_url=fake.base_url)
        assert backend.server_load() is None  # 404
        backend.close()
    finally:
        fake.shutdown()
        fake.server_close()
    backend = OpenAIBackend("m", base_url=fake.base_url, timeout_s=2)
    assert backend.server_load() is None  # nothing listens any more
    backend.close()


def test_429s_are_reported_as_they_come():
    # hold: the one admitted answer waits for the first 429, so the other three requests meet it however slowly
    # the client's threads start (timed answers let a loaded machine send the four one after another)
    fake = start("batching", time_scale=1000.0, lengths="answer", max_in_flight=1, retry_after_s=0.0, hold=True)
    try:
        backend = OpenAIBackend("m", base_url=fake.base_url, concurrency=4, backoff_s=0.01, max_retries=20,
                                timeout_s=60)
        prompt = Prompt(messages=({"role": "user", "content": "[1] a\n[2] b"},))
        answers = backend.generate([prompt] * 4, SamplingSettings(max_new_tokens=64))
        backend.close()
    finally:
        fake.shutdown()
        fake.server_close()
    assert backend.throttles == sum(a.throttled for a in answers) > 0
    assert backend.held_at_429 in (0, 1, 2, 3)  # never more than the other 3 requests


def test_auto_runs_under_a_rate_limit_without_failing_a_window():
    # hold: the 3 admitted answers wait for the first 429, so auto's first 8 windows meet the limit whatever the
    # machine's speed; how far the cap comes down, and whether the released answers first earn one step up before
    # the 429s are counted, depends on how they interleave with the engine's checks (exact caps:
    # tests/unit/test_concurrency.py), so this asserts that it comes down and, once down, stays down
    fake = start("batching", time_scale=100.0, lengths="answer", max_in_flight=3, retry_after_s=0.0, hold=True)
    try:
        reranker = Reranker("m", backend="openai", base_url=fake.base_url, concurrency="auto", backoff_s=0.01,
                            max_retries=20, max_new_tokens=64, top_k=20, timeout_s=60)
        rankings = reranker.rerank_many(requests(24))
        reranker.close()
    finally:
        fake.shutdown()
        fake.server_close()
    limits = reranker.engine.counts.limits
    capped = next(i for i, limit in enumerate(limits) if limit < 8)  # started at the backend's 8, capped by the 429s
    assert limits[0] == 8 and max(limits[capped:]) < 8, limits  # and never above the cap again
    assert fake.engine.stats.rejected > 0
    assert not any(r.failed_windows for r in rankings)
