"""The openai backend against the fake server over real HTTP: correct rankings, stats, a cut-off answer."""

from __future__ import annotations

import httpx

from rearank.api import Reranker
from rearank.backends.base import Prompt, SamplingSettings
from rearank.backends.openai import OpenAIBackend
from rearank.testing.fake_server import REASONING_MIN, start


def test_openai_backend_gets_correct_rankings_from_fake_server():
    server = start("batching", time_scale=1e5, lengths="reasoning", answer="number")
    try:
        grades = [3, 9, 1, 7, 7, 0, 5, 2]
        queries = [(f"query {q}", [(f"d{q}-{i}", f"grade {(g + q) % 10} text") for i, g in enumerate(grades)])
                   for q in range(3)]
        with Reranker("fake", backend="openai", base_url=server.base_url, concurrency=4, max_retries=0,
                      max_new_tokens=4096) as reranker:
            rankings = reranker.rerank_many(queries)
        for q, ranking in enumerate(rankings):
            # the server ranks by the grade in each text, highest first; ties keep the presented order
            want = [f"d{q}-{i}" for i in sorted(range(8), key=lambda i: (-((grades[i] + q) % 10), i))]
            assert ranking.docids == want
            assert ranking.failed_windows == 0
        stats = httpx.get(server.base_url.removesuffix("/v1") + "/stats").json()
        assert stats["requests"] == 3 and stats["completion_tokens"] >= 3 * REASONING_MIN
        assert 0 < stats["occupancy"] <= 1
        backend = OpenAIBackend("fake", base_url=server.base_url, max_retries=0)
        single = backend.generate([Prompt([{"role": "user", "content": "[1] a 1"}])], SamplingSettings(max_new_tokens=4))
        backend.close()
        assert single[0].finish_reason == "length" and "<answer>" not in single[0].text
    finally:
        server.shutdown()
        server.server_close()
