"""Throughput of ``rearank serve`` on 127.0.0.1 with the oracle backend (no model: HTTP, batching and the driver).

Requests are dl19 queries with their first ``--depth`` BM25 passages, ``--in-flight`` at a time over the Jina
route; prints requests/s, latency percentiles and how many requests shared a ``rerank_many`` batch.

    python bench/bench_serve.py [--data $REARANK_DATA/msmarco-v1-passage/dl19] [--requests 500] [--in-flight 32]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from pathlib import Path

import httpx

from rearank.api import Reranker
from rearank.data.packs import load_docs, load_qrels, load_topics
from rearank.io.trec import read_run
from rearank.server import RerankService, TextJudge, serve_in_thread


async def fire(url: str, bodies: list[dict], in_flight: int) -> list[float]:
    gate = asyncio.Semaphore(in_flight)

    async def one(client: httpx.AsyncClient, body: dict) -> float:
        async with gate:
            began = time.perf_counter()
            response = await client.post(url + "/v1/rerank", json=body)
            response.raise_for_status()
            return time.perf_counter() - began

    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=in_flight), timeout=120) as client:
        return await asyncio.gather(*(one(client, body) for body in bodies))


def main() -> None:
    default = Path(os.environ.get("REARANK_DATA", "../shared/data")) / "msmarco-v1-passage" / "dl19"
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=default, help="a TSV pack folder (topics, docs, qrels, run)")
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--in-flight", type=int, default=32)
    parser.add_argument("--depth", type=int, default=30, help="passages per request")
    args = parser.parse_args()
    topics, qrels = load_topics(args.data / "topics.tsv"), load_qrels(args.data / "qrels.txt")
    run = {q: [d for d, _ in pairs[:args.depth]] for q, pairs in read_run(args.data / "run.bm25.top100.trec").items()}
    docs = load_docs(args.data / "docs.tsv", {d for ids in run.values() for d in ids})
    cases = [{"query": topics[q], "documents": [docs[d][1] for d in ids]} for q, ids in run.items()]
    bodies = [cases[i % len(cases)] for i in range(args.requests)]

    judge = TextJudge(topics, docs, qrels)
    service = RerankService(Reranker(backend="oracle", qrels=judge.live), model_name="oracle", judge=judge,
                            capacity=max(256, args.in_flight))
    with serve_in_thread(service) as url:
        began = time.perf_counter()
        latencies = asyncio.run(fire(url, bodies, args.in_flight))
        wall = time.perf_counter() - began
    cuts = statistics.quantiles(latencies, n=100)
    print(f"{args.requests} requests x {args.depth} passages, {args.in_flight} in flight: {wall:.2f} s, "
          f"{args.requests / wall:.1f} requests/s; latency p50 {cuts[49] * 1000:.1f} ms, p95 {cuts[94] * 1000:.1f} ms")
    print(f"batches: {service.batcher.batches} rerank_many calls, {args.requests / service.batcher.batches:.2f} "
          f"requests per batch on average, largest {service.batcher.largest_batch}")


if __name__ == "__main__":
    main()
