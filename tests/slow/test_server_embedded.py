"""The rerank server generating with the embedded SmolLM2 (hf backend): every document gets a score (mechanics only)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise

import httpx
import pytest

from rearank.api import Reranker
from rearank.server import RerankService
from tests.serving import running

pytestmark = pytest.mark.slow

DOCS = ["Fleas go through egg, larva, pupa and adult stages.", "Dogs bark at night.",
        "Adult fleas lay eggs on their host.", "The stock market rose.", "Flea larvae spin cocoons."]


def test_embedded_model_behind_the_jina_and_cohere_routes():
    reranker = Reranker("embedded", backend="hf", max_new_tokens=24, window=3, step=2)
    service = RerankService(reranker, model_name="smollm2")
    with running(service) as url, ThreadPoolExecutor(2) as pool:
        jobs = [pool.submit(httpx.post, url + path, json={"query": "flea life cycle", "documents": DOCS}, timeout=600)
                for path in ("/v1/rerank", "/v2/rerank")]
        answers = [job.result().json() for job in jobs]
    for answer in answers:
        indices = [r["index"] for r in answer["results"]]
        scores = [r["relevance_score"] for r in answer["results"]]
        assert sorted(indices) == list(range(5))  # all N documents, whatever the model answered
        assert all(a > b for a, b in pairwise(scores)) and all(0 < s <= 1 for s in scores)
        assert answer["rearank"]["calls"] == 2 and answer["rearank"]["status"] in ("ok", "degraded")
    assert answers[0]["rearank"]["order"] == answers[1]["rearank"]["order"]  # greedy: same input, same ranking
