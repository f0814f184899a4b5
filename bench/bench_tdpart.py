"""Top-down partitioning (``--strategy tdpart``) against the sliding window: model calls and sequential rounds
per query, per-query latency on a batching server, and nDCG@10 on DL19 and DL21.

Parts, each one run (ratios are tdpart over sliding):

* **oracle** and **noisy oracle** on every judged query of dl19 and dl21 (BM25 top-100): calls, rounds and
  nDCG@10 per strategy. The noisy oracle answers each window with its judged order and then swaps
  ``round(noise x window)`` random pairs of it (seeded by the window's passages, so both strategies meet the same
  noise for the same window); ``--noise`` sets the fractions.
* **latency**: queries sent one at a time (each waits for its own windows only) to the fake batching server
  (:mod:`rearank.testing.fake_server`, continuous batching, reasoning-length answers, simulated seconds), through
  the openai backend: the mean seconds a query waits, and the throughput of all of them at once.
* **embedded**: the embedded SmolLM2-135M (hf backend, CPU; near chance, so this part shows the mechanics, not
  quality) on the first ``--embedded-queries`` judged queries of dl19 and dl21 at depth ``--embedded-depth``,
  rankgpt template (a bare permutation), passages cut to ``--embedded-budget``, ``--embedded-tokens`` new tokens.
  The defaults (2 queries, top-50, 64 new tokens, one torch thread) bound it on a shared 2-core CPU, where a
  window took 30 s to a minute (and two torch threads 2.4 times as long as one: the cores were oversubscribed).

    python bench/bench_tdpart.py [--parts oracle latency embedded] [--noise 0.1 0.3] [--embedded-queries 2]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import statistics
import time
from collections.abc import Sequence
from typing import Any

from rearank.api import Reranker
from rearank.backends.base import STOP, Generation, Prompt
from rearank.backends.oracle import OracleBackend
from rearank.data import packs
from rearank.engine import Engine
from rearank.measures.ir import evaluate
from rearank.methods import Listwise
from rearank.methods.listwise.answer import format_answer
from rearank.run.stats import RunStats
from rearank.testing.fake_server import ServiceModel, start
from rearank.types import Request, Result

STRATEGIES = ("sliding", "tdpart")
DATASETS = ("dl19", "dl21")


class NoisyOracle(OracleBackend):
    """The oracle with ``round(noise x n)`` random pairs of each window's judged order swapped."""

    def __init__(self, qrels, noise: float) -> None:
        super().__init__(qrels)
        self.noise = noise

    def _answer(self, prompt: Prompt) -> Generation:
        judged = self.qrels.get(prompt.qid, {})
        grades = [judged.get(docid, 0) for docid in prompt.docids]
        order = sorted(range(len(grades)), key=lambda i: -grades[i])
        rng = random.Random(hashlib.sha256("\t".join((prompt.qid, *prompt.docids)).encode()).digest())
        for _ in range(round(self.noise * len(order))):
            i, j = rng.sample(range(len(order)), 2)
            order[i], order[j] = order[j], order[i]
        text = f"<answer>{format_answer(order)}</answer>"
        return Generation(text=text, prompt_tokens=0, completion_tokens=len(order), finish_reason=STOP)


def ndcg10(qrels: dict, results: Sequence[Result]) -> float:
    judged = {r.query.qid: qrels[r.query.qid] for r in results if qrels.get(r.query.qid)}
    run = {r.query.qid: [(c.docid, float(len(r.candidates) - i)) for i, c in enumerate(r.candidates)]
           for r in results}
    return evaluate(judged, run, ["nDCG@10"]).aggregate["ndcg_cut_10"]


def figures(results: Sequence[Result], qrels: dict) -> dict[str, float]:
    stats = RunStats()
    for result in results:
        stats.add(result)
    d = stats.to_dict()
    return {"calls": d["calls_per_query"], "rounds": d["rounds_per_query"], "ndcg": ndcg10(qrels, results)}


def judged_requests(name: str, top_k: int = 100, max_queries: int | None = None) -> tuple[list[Request], dict]:
    qrels = packs.load_qrels(packs.resolve(name).qrels)
    requests = [r for r in packs.load_requests(dataset=name, top_k=top_k) if qrels.get(r.query.qid)]
    return requests[:max_queries], qrels


def print_pair(label: str, rows: dict[str, dict[str, float]]) -> None:
    s, t = rows["sliding"], rows["tdpart"]
    print(f"  {label:40s} calls/query {s['calls']:5.2f} -> {t['calls']:5.2f} ({t['calls'] / s['calls']:.2f}x)   "
          f"rounds/query {s['rounds']:5.2f} -> {t['rounds']:5.2f} ({t['rounds'] / s['rounds']:.2f}x)   "
          f"nDCG@10 {s['ndcg']:.4f} -> {t['ndcg']:.4f} ({t['ndcg'] - s['ndcg']:+.4f})")


def tdpart_options(args: argparse.Namespace, strategy: str) -> dict[str, int]:
    """``--pivot`` and ``--budget`` for a tdpart run (a sliding run refuses them)."""
    return {"pivot": args.pivot, "budget": args.budget} if strategy == "tdpart" else {}


def oracle_part(args: argparse.Namespace) -> None:
    print(f"== oracle and noisy oracle, BM25 top-100, window 20 (sliding step 10; tdpart pivot {args.pivot}, "
          f"budget {args.budget}); sliding -> tdpart")
    for name in DATASETS:
        requests, qrels = judged_requests(name)
        print(f"{name}: {len(requests)} judged queries")
        for noise in (0.0, *args.noise):
            rows = {}
            for strategy in STRATEGIES:
                backend = OracleBackend(qrels) if noise == 0 else NoisyOracle(qrels, noise)
                method = Listwise(strategy=strategy, **tdpart_options(args, strategy))
                rows[strategy] = figures(Engine(backend, method).rerank(requests, progress=False), qrels)
            print_pair("oracle" if noise == 0 else f"noisy oracle ({noise:.0%} of a window swapped)", rows)
        rows = {}
        for budget in (20, args.budget):
            method = Listwise(strategy="tdpart", pivot=args.pivot, budget=budget)
            rows[budget] = figures(Engine(OracleBackend(qrels), method).rerank(requests, progress=False), qrels)
        print(f"  {'oracle, tdpart budget 20 (paper)':40s} calls/query {rows[20]['calls']:5.2f}   rounds/query "
              f"{rows[20]['rounds']:5.2f}   nDCG@10 {rows[20]['ndcg']:.4f} (budget {args.budget}: "
              f"{rows[args.budget]['ndcg']:.4f})")


def latency_part(args: argparse.Namespace) -> None:
    requests, _ = judged_requests("dl19", max_queries=args.latency_queries)
    model = ServiceModel("batching")
    print(f"== latency: fake batching server (step {model.t0 * 1000:g} ms x (1 + {model.alpha} b), reasoning-length "
          f"answers 100-2,000 tokens), {len(requests)} dl19 queries x top-100, openai backend, 32 in flight; "
          f"simulated seconds (time scale {args.time_scale:g}). Answers: 'presented' keeps each window's order (a "
          f"model agreeing with BM25), 'number' ranks by the first number in each passage (one that disagrees)")
    for answer in ("presented", "number"):
        rows: dict[str, dict[str, Any]] = {}
        for strategy in STRATEGIES:
            rows[strategy] = _latency(requests, model, answer, strategy, args.time_scale)
            row = rows[strategy]
            print(f"  {answer:9s} {strategy:8s} calls/query {row['calls']:5.2f}  rounds/query {row['rounds']:4.2f}  "
                  f"mean wait per query {row['wait']:6.1f} s (max {row['max']:6.1f})  all {len(requests)} at once "
                  f"{row['together']:6.1f} s")
        s, t = rows["sliding"], rows["tdpart"]
        print(f"  {answer:9s} tdpart / sliding: wait per query {t['wait'] / s['wait']:.2f}x, all at once "
              f"{t['together'] / s['together']:.2f}x")


def _latency(requests: list[Request], model: ServiceModel, answer: str, strategy: str,
             time_scale: float) -> dict[str, Any]:
    """Queries one at a time (what a RAG pipeline waits for), then all at once, on a fresh fake server."""
    server = start(model, time_scale=time_scale, lengths="reasoning", answer=answer)
    try:
        reranker = Reranker("fake", backend="openai", base_url=server.base_url, max_new_tokens=2048,
                            strategy=strategy, concurrency=32)
        waits = []
        for request in requests:
            started = time.perf_counter()
            reranker.rerank_many([request])
            waits.append((time.perf_counter() - started) * server.time_scale)
        server.reset()
        started = time.perf_counter()
        rankings = reranker.rerank_many(requests)
        together = (time.perf_counter() - started) * server.time_scale
        reranker.close()
    finally:
        server.shutdown()
        server.server_close()
    return {"wait": statistics.mean(waits), "max": max(waits), "together": together,
            "calls": sum(len(r.traces) for r in rankings) / len(rankings),
            "rounds": sum(max(t.round for t in r.traces) + 1 for r in rankings) / len(rankings)}


def embedded_part(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(args.embedded_threads)
    print(f"== embedded SmolLM2-135M (hf, CPU, {args.embedded_threads} torch thread(s); near chance: mechanics, not "
          f"quality), first {args.embedded_queries} judged queries x BM25 top-{args.embedded_depth}, rankgpt "
          f"template, passages {args.embedded_budget}, {args.embedded_tokens} new tokens; sliding -> tdpart")
    data = {name: judged_requests(name, top_k=args.embedded_depth, max_queries=args.embedded_queries)
            for name in DATASETS}
    rows: dict[str, dict[str, dict[str, float]]] = {name: {} for name in DATASETS}
    for strategy in STRATEGIES:  # one model load per strategy
        reranker = Reranker("embedded", backend="hf", template="rankgpt", max_new_tokens=args.embedded_tokens,
                            top_k=args.embedded_depth, passage_budget=args.embedded_budget, strategy=strategy,
                            **tdpart_options(args, strategy))
        for name, (requests, qrels) in data.items():
            started = time.perf_counter()
            rankings = reranker.rerank_many(requests)
            wall = time.perf_counter() - started
            results = [Result(r.query, [request.candidates[p.index] for p in r.passages], r.traces)
                       for r, request in zip(rankings, requests)]
            rows[name][strategy] = {**figures(results, qrels), "wall": wall}
            print(f"  {name} {strategy:8s} {wall:6.1f} s wall; parse statuses: "
                  f"{dict(sorted(_count(t.status for r in rankings for t in r.traces).items()))}", flush=True)
        reranker.close()
    for name, (requests, qrels) in data.items():
        print_pair(f"{name} embedded ({len(requests)} queries)", rows[name])
        bm25 = ndcg10(qrels, [Result(r.query, r.candidates) for r in requests])
        print(f"  {name} first stage (BM25) nDCG@10 on these queries: {bm25:.4f}; wall tdpart / sliding "
              f"{rows[name]['tdpart']['wall'] / rows[name]['sliding']['wall']:.2f}x")


def _count(items) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        out[item] = out.get(item, 0) + 1
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", choices=("oracle", "latency", "embedded"),
                        default=["oracle", "latency", "embedded"])
    parser.add_argument("--noise", type=float, nargs="+", default=[0.1, 0.3], help="noisy oracle: fractions swapped")
    parser.add_argument("--pivot", type=int, default=10)
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--latency-queries", type=int, default=8)
    parser.add_argument("--time-scale", type=float, default=200.0)
    parser.add_argument("--embedded-queries", type=int, default=2, help="embedded: judged queries per dataset (2)")
    parser.add_argument("--embedded-depth", type=int, default=50, help="embedded: BM25 depth (50)")
    parser.add_argument("--embedded-tokens", type=int, default=64, help="embedded: max new tokens (64)")
    parser.add_argument("--embedded-threads", type=int, default=1, help="embedded: torch threads (1)")
    parser.add_argument("--embedded-budget", default="100c", help="embedded: passage budget (100c)")
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    started = time.perf_counter()
    for part in args.parts:
        {"oracle": oracle_part, "latency": latency_part, "embedded": embedded_part}[part](args)
    print(f"bench wall time {time.perf_counter() - started:.1f}s")


if __name__ == "__main__":
    main()
