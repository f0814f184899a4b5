"""Benchmark the listwise driver: overhead outside the backend, calls/tokens per query, sequential vs batched.

1. Oracle backend on dl19 (43 queries, BM25 top-100, w=20, s=10): driver time per query outside the
   backend (prompt rendering and building, parsing, bookkeeping), with the released 400-character budget and a
   300-token cut by the embedded model's tokenizer; LLM calls and prompt/completion tokens per query.
2. hf backend with the embedded SmolLM2-135M on CPU, a few queries with a small generation budget:
   one window at a time (RankGPT/Rearank reference style: batch_size=1) against the batched driver
   (the windows of all queries in one backend call), wall time and tokens/s. The batched driver runs with
   the hf backend generating one prompt at a time and with all of them in one ``generate()`` call.

Run: ``python bench/bench_driver.py`` (``REARANK_DATA`` must hold msmarco-v1-passage/dl19).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

from rearank.backends.base import Backend, BackendBase, Generation, Prompt, SamplingSettings
from rearank.backends.oracle import OracleBackend
from rearank.data.packs import load_qrels, load_requests
from rearank.engine import Engine
from rearank.methods import Listwise
from rearank.run.stats import RunStats
from rearank.types import Request, Result


class Timed(BackendBase):
    """Wrap a backend and add up the time spent inside ``generate``."""

    def __init__(self, backend: Backend) -> None:
        self.inner = backend
        self.name = backend.name
        self.tokenizer = backend.tokenizer
        self.seconds = 0.0
        self.calls = 0

    def generate(self, prompts: Sequence[Prompt], settings: SamplingSettings) -> list[Generation]:
        started = time.perf_counter()
        try:
            return self.inner.generate(prompts, settings)
        finally:
            self.seconds += time.perf_counter() - started
            self.calls += 1


def run(reranker: Engine, backend: Timed, requests: list[Request]) -> tuple[list[Result], float, RunStats]:
    stats = RunStats()
    backend.seconds, backend.calls = 0.0, 0
    started = time.perf_counter()
    results = reranker.rerank(requests, on_result=stats.add, progress=False)
    return results, time.perf_counter() - started, stats


def overhead(requests: list[Request], repeats: int) -> None:
    from transformers import AutoTokenizer

    from rearank.backends.models import embedded_model_path

    qrels = load_qrels("dl19")
    tokenizer = AutoTokenizer.from_pretrained(str(embedded_model_path()))
    print(f"== driver overhead: oracle backend, dl19, {len(requests)} queries x top-100, w=20 s=10, batch 64")
    for label, tok, budget in (("released budget (400 characters)", None, None),
                               ("embedded tokenizer, 300 tokens", tokenizer, "300 tokens")):
        backend = Timed(OracleBackend(qrels).answer_format(Listwise()))  # the listwise answer format
        best = None
        for _ in range(repeats):
            _, wall, stats = run(Engine(backend, Listwise(tokenizer=tok, passage_budget=budget), batch_size=64),
                                 backend, requests)
            per_query_ms = (wall - backend.seconds) / len(requests) * 1000
            best = per_query_ms if best is None else min(best, per_query_ms)
        d = stats.to_dict()
        print(f"  {label:32s} driver overhead {best:6.2f} ms/query (best of {repeats}; goal < 5 ms); "
              f"wall {wall:.2f}s, in backend {backend.seconds:.2f}s")
    print(f"  LLM calls/query {d['calls_per_query']:.1f}; oracle 'tokens' are words: "
          f"prompt {d['prompt_tokens_per_query']:.0f}/query, completion {d['completion_tokens_per_query']:.0f}/query")


def sequential_vs_batched(requests: list[Request], max_new_tokens: int, passage_tokens: int, top_k: int) -> None:
    from rearank.backends.hf import HFBackend

    hf = HFBackend("embedded")
    backend = Timed(hf)
    settings = SamplingSettings(max_new_tokens=max_new_tokens)
    n = len(requests)
    print(f"== hf embedded SmolLM2-135M on CPU: {n} dl19 queries x top-{top_k}, "
          f"passages <= {passage_tokens} tokens, max_new_tokens {max_new_tokens}")
    Engine(backend, Listwise(top_k=20), SamplingSettings(max_new_tokens=1)).rerank(requests[:1], progress=False)
    figures = {}
    for label, batch, micro in (("one window at a time", 1, 1), ("batched driver, hf micro-batch 1", n, 1),
                                (f"batched driver, hf micro-batch {n}", n, n)):
        hf.batch_size = micro  # prompts per transformers generate() call inside the backend
        reranker = Engine(backend, Listwise(top_k=top_k, passage_budget=f"{passage_tokens} tokens"), settings,
                          batch_size=batch)
        _, wall, stats = run(reranker, backend, requests)
        d = stats.to_dict()
        figures[label] = wall
        tokens = d["prompt_tokens"] + d["completion_tokens"]
        print(f"  {label:34s} wall {wall:6.1f}s  backend calls {backend.calls:2d}  windows {d['calls']}  "
              f"prompt+completion {d['prompt_tokens']}+{d['completion_tokens']} tok  {tokens / wall:6.1f} tok/s "
              f"({d['completion_tokens'] / wall:.2f} generated tok/s)")
    print(f"  per query: {d['calls_per_query']:.1f} LLM calls, {d['prompt_tokens_per_query']:.0f} prompt + "
          f"{d['completion_tokens_per_query']:.0f} completion tokens")
    base = figures["one window at a time"]
    print("  speed-up over one window at a time: "
          + ", ".join(f"{label} {base / wall:.2f}x" for label, wall in figures.items() if wall != base))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="oracle overhead: best of N")
    parser.add_argument("--hf-queries", type=int, default=2, help="queries for the hf comparison (0: skip it)")
    parser.add_argument("--hf-top-k", type=int, default=30)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--max-passage-tokens", type=int, default=32)
    args = parser.parse_args()
    requests = load_requests(dataset="dl19")
    overhead(requests, args.repeats)
    if args.hf_queries:
        sequential_vs_batched(requests[:args.hf_queries], args.max_new_tokens, args.max_passage_tokens,
                              args.hf_top_k)


if __name__ == "__main__":
    main()
