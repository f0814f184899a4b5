"""``rearank serve`` on 127.0.0.1 with the oracle backend (no model: HTTP, the feed and the driver).

Throughput: dl19 queries with their first ``--depth`` BM25 passages, ``--in-flight`` at a time over the Jina
route, with the server's feed or its former batcher (``--scheduler``), the backend taking ``--call-ms`` more per
call; prints requests/s, latency percentiles and how many windows shared a backend call.

Latency (after the throughput run, or alone with ``--latency``): a small request (20 passages, one window)
alone and while a large one (100 passages, nine windows one after another) is being ranked, on a backend that
takes ``--call-ms`` more per call (a model's cost, emulated; 100 ms by default); with the server's feed (one
running engine) and with the batcher the server had before (whole requests per ``rerank_many`` call, kept here
as the baseline).

    python bench/bench_serve.py [--data $REARANK_DATA/msmarco-v1-passage/dl19] [--requests 500] [--in-flight 32]
                                [--scheduler feed|batcher]
    python bench/bench_serve.py --latency [--call-ms 100] [--trials 5]   # the latency comparison only
"""

from __future__ import annotations

import argparse
import asyncio
import queue
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from rearank.api import Reranker
from rearank.data.packs import data_root, load_docs, load_qrels, load_topics
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
    default = data_root() / "msmarco-v1-passage" / "dl19"
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=default, help="a TSV pack folder (topics, docs, qrels, run)")
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--in-flight", type=int, default=32)
    parser.add_argument("--depth", type=int, default=30, help="passages per request")
    parser.add_argument("--scheduler", choices=("feed", "batcher"), default="feed",
                        help="throughput: the server's feed, or the batcher it had before")
    parser.add_argument("--latency", action="store_true", help="only the small-request latency comparison")
    parser.add_argument("--call-ms", type=float, help="the backend's added time per call (default: 0 for "
                        "throughput, 100 ms for the latency comparison)")
    parser.add_argument("--trials", type=int, default=5, help="latency: repeats (medians are printed)")
    args = parser.parse_args()
    topics, qrels = load_topics(args.data / "topics.tsv"), load_qrels(args.data / "qrels.txt")
    run = {q: [d for d, _ in pairs[:100]] for q, pairs in read_run(args.data / "run.bm25.top100.trec").items()}
    docs = load_docs(args.data / "docs.tsv", {d for ids in run.values() for d in ids})
    if not args.latency:
        throughput(args, topics, docs, qrels, {q: ids[:args.depth] for q, ids in run.items()})
    latency(args, topics, docs, qrels, run)


def throughput(args: argparse.Namespace, topics, docs, qrels, run) -> None:
    """Requests/s and latency percentiles of ``--requests`` requests, ``--in-flight`` at a time."""
    cases = [{"query": topics[q], "documents": [docs[d][1] for d in ids]} for q, ids in run.items()]
    bodies = [cases[i % len(cases)] for i in range(args.requests)]
    judge = TextJudge(topics, docs, qrels)
    reranker = slowed(Reranker(backend="oracle", qrels=judge.live), args.call_ms or 0)
    service = RerankService(reranker, model_name="oracle", judge=judge, capacity=max(256, args.in_flight))
    if args.scheduler == "batcher":
        service.feed = RequestBatcher(reranker)
    with serve_in_thread(service) as url:
        began = time.perf_counter()
        latencies = asyncio.run(fire(url, bodies, args.in_flight))
        wall = time.perf_counter() - began
    cuts = statistics.quantiles(latencies, n=100)
    print(f"{args.scheduler}: {args.requests} requests x {args.depth} passages, {args.in_flight} in flight, backend "
          f"+{args.call_ms or 0:g} ms/call: {wall:.2f} s, {args.requests / wall:.1f} requests/s; latency p50 "
          f"{cuts[49] * 1000:.1f} ms, p95 {cuts[94] * 1000:.1f} ms")
    if args.scheduler == "feed":
        print(f"backend calls: {service.feed.calls}, largest {service.feed.largest_call} windows")


class RequestBatcher:
    """The server's scheduling before the feed (the baseline): a worker drains the queue of whole requests into
    one ``rerank_many`` call at a time, so a request arriving mid-batch waits for the batch's slowest query."""

    def __init__(self, reranker: Reranker) -> None:
        self.rerank_many, self.lock = reranker.rerank_many, threading.Lock()
        self.load, self.capacity = 0, 256
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._work, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join(30)

    def submit(self, request, done) -> None:
        self._queue.put((request, done))

    def _work(self) -> None:
        while True:
            batch = [self._queue.get()]
            while not self._queue.empty():
                batch.append(self._queue.get())
            jobs = {job[0].query.qid: job[1] for job in batch if job is not None}

            def answer(ranking, jobs=jobs) -> None:
                jobs[ranking.query.qid](ranking, None)

            if jobs:
                with self.lock:
                    self.rerank_many([job[0] for job in batch if job is not None], answer)
            if None in batch:
                return


def slowed(reranker: Reranker, call_ms: float) -> Reranker:
    """``reranker`` with its backend taking ``call_ms`` more per call (a model's cost, emulated)."""
    generate = reranker.backend.generate

    def slow(prompts, settings):
        time.sleep(call_ms / 1000)
        return generate(prompts, settings)

    if call_ms > 0:
        reranker.backend.generate = slow
    return reranker


def latency(args: argparse.Namespace, topics, docs, qrels, run) -> None:
    """Small-request latency, alone and with a large request in flight, under the feed and the old batcher."""
    call_ms = 100.0 if args.call_ms is None else args.call_ms
    (large_q, large_ids), (small_q, small_ids) = list(run.items())[:2]
    large = {"query": topics[large_q], "documents": [docs[d][1] for d in large_ids[:100]]}
    small = {"query": topics[small_q], "documents": [docs[d][1] for d in small_ids[:20]]}
    rows = {}
    for scheduler in ("batcher (before)", "feed"):
        judge = TextJudge(topics, docs, qrels)
        reranker = slowed(Reranker(backend="oracle", qrels=judge.live), call_ms)
        service = RerankService(reranker, model_name="oracle", judge=judge)
        if scheduler != "feed":
            service.feed = RequestBatcher(reranker)
        alone, beside, large_s = [], [], []
        with serve_in_thread(service) as url, httpx.Client(timeout=120) as client, ThreadPoolExecutor(1) as pool:
            for _ in range(args.trials):
                began = time.perf_counter()
                client.post(url + "/v1/rerank", json=small).raise_for_status()
                alone.append(time.perf_counter() - began)
                began_large = time.perf_counter()
                pending = pool.submit(client.post, url + "/v1/rerank", json=large)
                time.sleep(1.5 * call_ms / 1000)  # the large one is in its second window
                began = time.perf_counter()
                client.post(url + "/v1/rerank", json=small).raise_for_status()
                beside.append(time.perf_counter() - began)
                pending.result().raise_for_status()
                large_s.append(time.perf_counter() - began_large)
        rows[scheduler] = (statistics.median(alone), statistics.median(beside), statistics.median(large_s))
    print(f"small request (20 passages, 1 window) latency, median of {args.trials}; backend +{call_ms:g} ms/call; "
          "large request: 100 passages, 9 windows")
    print(f"{'scheduler':<18} {'small alone':>12} {'small + large':>14} {'ratio':>6} {'large':>8}")
    for scheduler, (a, b, big) in rows.items():
        print(f"{scheduler:<18} {a * 1000:>9.0f} ms {b * 1000:>11.0f} ms {b / a:>6.2f} {big * 1000:>5.0f} ms")


if __name__ == "__main__":
    main()
