"""The rerank server on the dl19 pack (oracle backend) answered to real clients: Cohere SDK, rerankers, LangChain,
and a load test of 500 requests with 32 in flight, every ranking checked against the oracle's."""

from __future__ import annotations

import asyncio
from itertools import pairwise

import httpx
import pytest

from rearank.api import Reranker
from rearank.data.packs import load_docs, load_qrels, load_topics
from rearank.io.trec import read_run
from rearank.server import Limits
from rearank.types import Candidate, Query, Request
from tests.serving import oracle_service, running

KEY = "integration-key-0123456789"
DEPTH = 30  # candidates per request: two windows of 20 by 10, the second depending on the first
LOAD_REQUESTS, IN_FLIGHT = 500, 32


@pytest.fixture(scope="module")
def pack(request):
    from tests.conftest import require_pack

    folder = require_pack("msmarco-v1-passage/dl19")
    topics, qrels = load_topics(folder / "topics.tsv"), load_qrels(folder / "qrels.txt")
    run = {qid: [d for d, _ in pairs[:DEPTH]] for qid, pairs in read_run(folder / "run.bm25.top100.trec").items()}
    docs = load_docs(folder / "docs.tsv", {d for ids in run.values() for d in ids})
    # The oracle's ranking through the face, by qid and docid (no text matching): what every answer must equal.
    with Reranker(backend="oracle", qrels=qrels) as rr:
        expected = {r.query.qid: r.order for r in rr.rerank_many(
            [Request(Query(qid, topics[qid]), [Candidate(d, 0.0, docs[d][1]) for d in ids]) for qid, ids in run.items()])}
    cases = [(topics[qid], [docs[d][1] for d in ids], expected[qid]) for qid, ids in run.items()]
    return topics, docs, qrels, cases


@pytest.fixture(scope="module")
def server(pack):
    topics, docs, qrels, _ = pack
    service = oracle_service(topics, docs, qrels, options={}, api_key=KEY, capacity=64,
                             limits=Limits(max_documents=100))
    with running(service) as url:
        yield url, service


def test_cohere_sdk(pack, server):
    import cohere

    url, _ = server
    client = cohere.ClientV2(api_key=KEY, base_url=url)
    for query, texts, order in pack[3][:5]:
        response = client.rerank(model="rearank-oracle", query=query, documents=texts, top_n=len(texts))
        assert [r.index for r in response.results] == order
        scores = [r.relevance_score for r in response.results]
        assert all(0 <= s <= 1 for s in scores) and all(a > b for a, b in pairwise(scores))
    with pytest.raises(cohere.core.ApiError) as err:
        cohere.ClientV2(api_key="wrong", base_url=url).rerank(model="rearank-oracle", query="q", documents=["d"])
    assert err.value.status_code == 401


def test_rerankers_api_ranker(pack, server):
    from rerankers import Reranker as Rerankers

    url, _ = server
    ranker = Rerankers("rearank-oracle", model_type="jina", api_key=KEY, url=url + "/v1/rerank", verbose=0)
    for query, texts, order in pack[3][5:10]:
        ranked = ranker.rank(query, texts)
        assert [r.document.doc_id for r in ranked.results] == order
        assert [r.rank for r in ranked.results] == list(range(1, len(texts) + 1))


def test_langchain_cohere_rerank(pack, server):
    from langchain_cohere import CohereRerank
    from langchain_core.documents import Document

    url, _ = server
    compressor = CohereRerank(model="rearank-oracle", base_url=url, cohere_api_key=KEY, top_n=5)
    for query, texts, order in pack[3][10:13]:
        kept = compressor.compress_documents([Document(page_content=t) for t in texts], query)
        assert [d.page_content for d in kept] == [texts[i] for i in order[:5]]
        assert [round(d.metadata["relevance_score"], 6) for d in kept] == [
            round((DEPTH - r) / DEPTH, 6) for r in range(5)]  # (n - rank) / n


def test_load_500_requests_32_in_flight(pack, server):
    url, service = server
    cases = pack[3]
    calls_before = service.feed.calls

    async def one(client: httpx.AsyncClient, gate: asyncio.Semaphore, i: int) -> tuple[int, int, list[int]]:
        query, texts, _ = cases[i % len(cases)]
        path = ("/v1/rerank", "/rerank", "/v2/rerank")[i % 3]
        async with gate:
            response = await client.post(url + path, json={"model": "rearank-oracle", "query": query,
                                                           "documents": texts})
        body = response.json()
        return i, response.status_code, [r["index"] for r in body.get("results", [])]

    async def load() -> list[tuple[int, int, list[int]]]:
        gate = asyncio.Semaphore(IN_FLIGHT)
        limits = httpx.Limits(max_connections=IN_FLIGHT)
        headers = {"Authorization": f"Bearer {KEY}"}
        async with httpx.AsyncClient(limits=limits, headers=headers, timeout=60) as client:
            return await asyncio.wait_for(asyncio.gather(*(one(client, gate, i) for i in range(LOAD_REQUESTS))), 300)

    answers = asyncio.run(load())
    assert len(answers) == LOAD_REQUESTS
    assert [status for _, status, _ in answers] == [200] * LOAD_REQUESTS
    wrong = [i for i, _, order in answers if order != cases[i % len(cases)][2]]
    assert wrong == []
    calls = service.feed.calls - calls_before
    assert service.feed.largest_call > 1  # windows of concurrent requests shared backend calls
    print(f"load: {LOAD_REQUESTS} requests, {IN_FLIGHT} in flight, {calls} backend calls, "
          f"largest {service.feed.largest_call} windows")
