"""Prompt tokens per window and per query of the builtin templates, old and new passage budgets side by side.

For each dataset, the first N judged queries' BM25 top-100 are cut into the default schedule (window 20,
step 10: 9 windows) in first-stage order, rendered with ``rearank.prompts.build_messages`` and counted with the
embedded SmolLM2 tokenizer's chat template (as verl and the hf backend count them). Budgets: the template's
declared one (the released character cuts: rearank 400, rankgpt 300 characters), the former default of 300
tokens (hf/vllm backends, which have a tokenizer) and the former 300 words (the openai backend, which has none).

    python bench/bench_prompt_tokens.py [--queries 30] [--datasets dl19 beir-scifact]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from data_synthesis.tokens import PromptTokenCounter, load_tokenizer
from rearank.data.packs import load_requests
from rearank.methods.listwise.window import schedule
from rearank.methods.templates import load_template
from rearank.prompts import build_messages, render_passages

#: The former defaults, beside each template's declared budget.
OLD_BUDGETS = ("300 tokens", "300 words")


def measure(requests, template, budget, tokenizer, counter) -> tuple[float, float, int]:
    """Mean prompt tokens per window, mean per query (sum over its windows), and the largest window."""
    prompts, owners = [], []
    for index, request in enumerate(requests):
        texts = render_passages(request.candidates[:100], template, budget=budget, tokenizer=tokenizer)
        for start, end in schedule(len(texts)):
            prompts.append(build_messages(request.query.text, texts[start:end], template, clean=False))
            owners.append(index)
    lengths = np.asarray(counter.exact(prompts))
    per_query = np.bincount(owners, weights=lengths)
    return float(lengths.mean()), float(per_query.mean()), int(lengths.max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=30, help="first N queries of each dataset (30)")
    parser.add_argument("--datasets", nargs="+", default=["dl19", "beir-scifact"])
    args = parser.parse_args()
    tokenizer = load_tokenizer("embedded")
    started = time.perf_counter()
    print("prompt tokens (SmolLM2 chat template), BM25 top-100, window 20 / step 10 (9 windows per query), "
          f"first {args.queries} queries")
    print(f"{'dataset':14s} {'template':9s} {'budget':24s} {'tokens/window':>14s} {'max window':>11s} "
          f"{'tokens/query':>13s}")
    for dataset in args.datasets:
        requests = load_requests(dataset=dataset, top_k=100, max_queries=args.queries)
        for name in ("rearank", "rankgpt"):
            template = load_template(name)
            counter = PromptTokenCounter(tokenizer, template)
            declared = str(template.passage_budget)
            for budget in (declared, *OLD_BUDGETS):
                window, query, largest = measure(requests, template, budget, tokenizer, counter)
                label = f"{budget} (declared)" if budget == declared else f"{budget} (former)"
                print(f"{dataset:14s} {name:9s} {label:24s} {window:14,.0f} {largest:11,d} {query:13,.0f}")
    print(f"measured in {time.perf_counter() - started:.1f}s")


if __name__ == "__main__":
    main()
