"""Think budget sweep: tokens per window and parse rate of the embedded SmolLM2-135M (hf backend) on dl19 windows,
for several ``-O max_think_tokens`` values, with and without ``-O constrain=answer``.

Each setting reranks the same windows (the first ``--queries`` judged dl19 queries, BM25 top-``--top-k`` in windows
of ``--window``, the ``rearank`` reasoning template); ``max_new_tokens`` is the same for all, so the unconstrained
rows without a budget show how long the model reasons when nothing stops it. Prints one row per setting: windows,
parse rate (status ok by the shared parser), mean completion and reasoning tokens per window, budget hits, and the
seconds per window (CPU; compare within one run only).

    python bench/bench_think_budget.py [--queries 4] [--budgets none 0 16 64] [--max-new-tokens 256]
"""

from __future__ import annotations

import argparse
import time

from rearank.backends.base import SamplingSettings
from rearank.backends.registry import make_backend
from rearank.data.packs import load_requests
from rearank.engine import Engine
from rearank.methods import Listwise


def budget(text: str) -> int | None:
    return None if text == "none" else int(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=4)
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--window", type=int, default=10)
    parser.add_argument("--budgets", nargs="+", type=budget, default=[None, 0, 16, 64])
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--passage-budget", default="32 tokens")
    args = parser.parse_args()
    requests = load_requests(dataset="dl19", top_k=100, max_queries=args.queries)
    method = Listwise(window=args.window, step=max(args.window // 2, 1), top_k=args.top_k,
                      passage_budget=args.passage_budget)
    settings = SamplingSettings(max_new_tokens=args.max_new_tokens)
    print(f"dl19, {args.queries} queries, top-{args.top_k}, windows of {args.window}, max_new_tokens "
          f"{args.max_new_tokens}, embedded SmolLM2-135M (hf, CPU)")
    print(f"{'constrain':>9} {'max_think':>9} {'windows':>7} {'parsed ok':>9} {'tokens/window':>13} "
          f"{'think/window':>12} {'budget hits':>11} {'s/window':>8}", flush=True)
    for constrain in ("off", "answer"):
        for think in args.budgets:
            backend = make_backend("hf", "embedded", constrain=constrain, max_think_tokens=think)
            began = time.perf_counter()
            results = Engine(backend, method, settings, batch_size=args.queries).rerank(requests, progress=False)
            seconds = time.perf_counter() - began
            traces = [t for r in results for t in r.traces]
            n = max(len(traces), 1)
            ok = sum(t.status == "ok" for t in traces)
            closed = [t.think_tokens for t in traces if t.think_tokens is not None]
            think_mean = f"{sum(closed) / len(closed):.1f}" if closed else "-"
            print(f"{constrain:>9} {'none' if think is None else think:>9} {len(traces):>7} "
                  f"{ok / n:>9.0%} {sum(t.completion_tokens for t in traces) / n:>13.1f} {think_mean:>12} "
                  f"{sum(t.think_budget_hit for t in traces):>11} {seconds / n:>8.1f}", flush=True)
            backend.close()


if __name__ == "__main__":
    main()
