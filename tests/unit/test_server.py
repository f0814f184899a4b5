"""The rerank server over HTTP (uvicorn on 127.0.0.1, httpx) with the oracle backend: shapes, scores, errors."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from rearank.backends.base import Prompt, SamplingSettings
from rearank.backends.openai import OpenAIBackend
from rearank.server import Limits
from tests.serving import DOCS, EXPECTED, KEY, QRELS, QUERY, TEXTS, TOPICS, oracle_service, running

SCORES = [6 / 6, 5 / 6, 4 / 6, 3 / 6, 2 / 6, 1 / 6]  # (n - rank) / n


@pytest.fixture
def url():
    with running(oracle_service(TOPICS, DOCS, QRELS)) as base:
        yield base


@pytest.mark.parametrize("path", ["/v1/rerank", "/rerank"])
def test_jina_shape(url, path):
    body = httpx.post(url + path, json={"model": "rearank-oracle", "query": QUERY, "documents": TEXTS}).json()
    assert [r["index"] for r in body["results"]] == EXPECTED
    assert [r["relevance_score"] for r in body["results"]] == pytest.approx(SCORES)
    assert [r["document"]["text"] for r in body["results"]] == [TEXTS[i] for i in EXPECTED]
    assert body["model"] == "rearank-oracle" and body["usage"]["total_tokens"] > 0
    ext = body["rearank"]
    assert ext["status"] == "ok" and ext["calls"] == 2 and ext["order"] == EXPECTED
    assert [w["status"] for w in ext["windows"]] == ["ok", "ok"] and "<answer>" in ext["windows"][0]["reasoning"]


def test_top_n_objects_and_no_documents(url):
    docs = [{"text": t} for t in TEXTS]
    body = httpx.post(url + "/v1/rerank", json={"query": QUERY, "documents": docs, "top_n": 2,
                                                "return_documents": False}).json()
    assert body["results"] == [{"index": 2, "relevance_score": 1.0}, {"index": 4, "relevance_score": 5 / 6}]


def test_cohere_v2_shape(url):
    body = httpx.post(url + "/v2/rerank", json={"model": "rearank-oracle", "query": QUERY, "documents": TEXTS,
                                                "top_n": 3}).json()
    assert [(r["index"], r["relevance_score"]) for r in body["results"]] == list(zip(EXPECTED[:3], SCORES[:3]))
    assert body["meta"]["api_version"]["version"] == "2" and body["id"]


def test_fusion_with_first_stage_scores(url):
    # Scores rank doc 5 first. alpha = 0.5: fused = 0.5 * rank_score + 0.5 * minmax(score).
    # rank scores by doc (EXPECTED order): 2:1, 4:5/6, 0:4/6, 1:3/6, 3:2/6, 5:1/6; minmax of [0,0,0,0,0,10]: only doc 5
    # gets 1. Fused: 2:.5, 4:.4167, 0:.3333, 1:.25, 3:.1667, 5: .0833+.5=.5833 -> [5, 2, 4, 0, 1, 3].
    docs = [{"text": t, "score": 10.0 if i == 5 else 0.0} for i, t in enumerate(TEXTS)]
    body = httpx.post(url + "/v1/rerank", json={"query": QUERY, "documents": docs,
                                                "rearank": {"fusion_weight": 0.5}}).json()
    assert [r["index"] for r in body["results"]] == [5, 2, 4, 0, 1, 3]
    assert [r["relevance_score"] for r in body["results"]] == pytest.approx(SCORES)


def test_health_models_and_wrong_model(url):
    assert httpx.get(url + "/health").json()["status"] == "ok"
    assert httpx.get(url + "/v1/models").json()["data"][0]["id"] == "rearank-oracle"
    wrong = httpx.post(url + "/v1/rerank", json={"model": "gpt", "query": QUERY, "documents": TEXTS})
    assert wrong.status_code == 404 and "does not exist" in wrong.json()["error"]["message"]


def test_chat_completions_route_serves_the_backend(url):
    before = httpx.get(url + "/health").json()["queue"]["calls"]
    backend = OpenAIBackend("rearank-oracle", base_url=url, max_retries=0)
    [gen] = backend.generate([Prompt(messages=({"role": "user", "content": "hi"},))], SamplingSettings())
    backend.close()
    assert gen.finish_reason == "stop" and "<answer>" in gen.text  # the oracle's answer for an unjudged window
    assert httpx.get(url + "/health").json()["queue"]["calls"] == before + 1  # a call the engine made and counted


def test_limits_give_413_and_bad_bodies_422():
    limits = Limits(max_documents=4, max_document_chars=30, max_body_bytes=2000)
    with running(oracle_service(TOPICS, DOCS, QRELS, limits=limits)) as url:
        many = httpx.post(url + "/v1/rerank", json={"query": QUERY, "documents": TEXTS})
        assert many.status_code == 413
        assert many.json()["error"] == {"message": "6 documents is over the limit of 4 per request",
                                        "type": "too_large", "code": 413}
        long = httpx.post(url + "/v2/rerank", json={"query": QUERY, "documents": ["x" * 31]})
        assert long.status_code == 413 and long.json()["error"]["message"] == (
            "document 0 has 31 characters, over the limit of 30")
        big = httpx.post(url + "/v1/rerank", json={"query": QUERY, "documents": ["y" * 25] * 100})
        assert big.status_code == 413 and "over the limit of 2000 bytes" in big.json()["error"]["message"]
        bad = httpx.post(url + "/v1/rerank", json={"query": QUERY, "documents": [{"txt": "a"}]})
        assert bad.status_code == 422 and bad.json()["error"]["message"].startswith("invalid request: documents.0")
        empty = httpx.post(url + "/v1/rerank", json={"query": QUERY, "documents": []})
        assert empty.status_code == 422
        garbage = httpx.post(url + "/v1/rerank", content=b"{not json")
        assert garbage.status_code == 422 and garbage.json()["error"]["type"] == "invalid_request"


def test_bearer_key(caplog):
    with running(oracle_service(TOPICS, DOCS, QRELS, api_key=KEY)) as url:
        request = {"query": QUERY, "documents": TEXTS}
        none = httpx.post(url + "/v1/rerank", json=request)
        wrong = httpx.post(url + "/v2/rerank", json=request, headers={"Authorization": "Bearer nope"})
        right = httpx.post(url + "/v1/rerank", json=request, headers={"Authorization": f"Bearer {KEY}"})
        health = httpx.get(url + "/health")
    for denied in (none, wrong):
        assert denied.status_code == 401 and denied.headers["www-authenticate"] == "Bearer"
        assert denied.json()["error"]["type"] == "unauthorized" and KEY not in denied.text
    assert right.status_code == 200 and [r["index"] for r in right.json()["results"]] == EXPECTED
    assert health.status_code == 200
    assert KEY not in caplog.text


def test_over_capacity_is_429_with_retry_after():
    service = oracle_service(TOPICS, DOCS, QRELS, capacity=1)
    entered, release = threading.Event(), threading.Event()
    generate = service.reranker.backend.generate

    def gated(prompts, settings):
        entered.set()
        assert release.wait(60)
        return generate(prompts, settings)

    service.reranker.backend.generate = gated
    with running(service) as url, ThreadPoolExecutor(1) as pool:
        first = pool.submit(httpx.post, url + "/v1/rerank", json={"query": QUERY, "documents": TEXTS}, timeout=30)
        assert entered.wait(60)
        over = httpx.post(url + "/v2/rerank", json={"query": QUERY, "documents": TEXTS})
        release.set()
        assert [r["index"] for r in first.result().json()["results"]] == EXPECTED
    assert over.status_code == 429 and int(over.headers["retry-after"]) >= 1
    assert over.json()["error"]["type"] == "overloaded" and "at capacity (1 queries" in over.json()["error"]["message"]


def test_backend_failure_keeps_the_input_order():
    service = oracle_service(TOPICS, DOCS, QRELS)

    def broken(prompts, settings):
        raise RuntimeError("CUDA out of memory")

    service.reranker.backend.generate = broken
    with running(service) as url:
        body = httpx.post(url + "/v1/rerank", json={"query": QUERY, "documents": TEXTS}).json()
    assert [r["index"] for r in body["results"]] == list(range(6))
    assert [r["relevance_score"] for r in body["results"]] == pytest.approx(SCORES)
    assert body["rearank"]["status"] == "backend_error"
    assert "the backend failed (RuntimeError); the documents keep their input order" == body["rearank"]["message"]


def test_failed_windows_are_reported_as_degraded():
    from rearank.backends.base import Generation

    service = oracle_service(TOPICS, DOCS, QRELS)
    answer = service.reranker.backend.generate
    calls = []

    def second_fails(prompts, settings):
        calls.append(len(prompts))
        if len(calls) == 2:
            return [Generation("", 0, 0, finish_reason="error") for _ in prompts]
        return answer(prompts, settings)

    service.reranker.backend.generate = second_fails
    with running(service) as url:
        body = httpx.post(url + "/v1/rerank", json={"query": QUERY, "documents": TEXTS}).json()
    # Only the first window (2,6) applied: [0,1,2,4,3,5]; the failed (0,4) keeps its order.
    assert [r["index"] for r in body["results"]] == [0, 1, 2, 4, 3, 5]
    assert body["rearank"]["status"] == "degraded" and body["rearank"]["failed_windows"] == 1
    assert body["rearank"]["message"] == "1 of 2 windows failed in the backend and kept their input order"


def test_groupwise_method_over_http():
    # Groups of 4 over 6 partition into [0,3) and [3,6); the oracle scores each document by its grade, so the
    # final order sorts by grade (3: doc 2, 2: doc 4, 1: doc 0), unjudged in input order (1, 3, 5).
    with running(oracle_service(TOPICS, DOCS, QRELS, method="groupwise")) as url:
        body = httpx.post(url + "/v2/rerank", json={"query": QUERY, "documents": TEXTS}).json()
    assert [r["index"] for r in body["results"]] == [2, 4, 0, 1, 3, 5]
    assert body["rearank"]["method"] == "groupwise" and body["rearank"]["calls"] == 2
