"""Throughput of the RAG rewards that call no reader, on one core: the BAR-RAG generator reward
(rearank.methods.barrag.reward.compute_generator_score) and the ARENA reward (rearank.methods.arena.reward.compute_score).
Target: 20,000 completions/s. (The BAR-RAG selector reward waits on its reader; its own arithmetic is the
generator reward K times plus a parse.)

Completions: ~1,500 characters of reasoning, then the answer, with the defects of early training (no tags, wrong
order, a '<' in the analysis, truncated answers). Ground truths: gold answers (and ARENA's supporting ids) as the
synthesized parquet stores them, a JSON string; "grouped" (32 rollouts share one) and "distinct" cases.

    python bench/bench_rag_rewards.py [--completions 64000]
"""

from __future__ import annotations

import json
import random
import sys

import reward_harness
from reward_harness import main, reasoning

from rearank.methods.arena.reward import compute_score as arena_score
from rearank.methods.barrag.reward import compute_generator_score

ANSWERS = ["Claudio Javier López", "1989", "the Berlin Wall", "Paris", "Marie Curie", "New York City", "42"]


def truth(rng: random.Random, n: int) -> str:
    supporting = sorted(rng.sample(range(1, n + 1), rng.choice((2, 2, 3, 4))))
    return json.dumps({"answers": [rng.choice(ANSWERS)], "supporting": supporting})


def generator_completion(rng: random.Random) -> str:
    think = reasoning(rng, 5).replace("[", "Doc [")
    answer = rng.choice(ANSWERS)
    kind = rng.random()
    if kind < 0.1:
        return f"{think} so the answer is {answer}"
    if kind < 0.15:
        return f"<think>{think}</think><answer>{answer[:3]}"
    return f"<think>{think}</think>\n<answer>{answer}</answer>"


def arena_completion(rng: random.Random) -> str:
    ids = sorted(rng.sample(range(1, 11), rng.choice((1, 2, 2, 3))))
    analysis = reasoning(rng, 10).replace("[", "(").replace("]", ")")
    answer = rng.choice(ANSWERS)
    kind = rng.random()
    if kind < 0.1:
        return f"Answer: <relevance>{ids}</relevance><analysis>{analysis}</analysis><answer>{answer}</answer>"
    if kind < 0.15:
        return f"<relevance>{ids}</relevance><analysis>{analysis} a < b</analysis><answer>{answer}</answer>"
    if kind < 0.2:
        return f"<relevance>{ids}</relevance><analysis>{analysis}"
    return f"<relevance>{json.dumps(ids)}</relevance><analysis>{analysis}</analysis><answer>{answer}</answer>"


if __name__ == "__main__":
    reward_harness.make_ground_truth = truth  # the harness draws listwise labels; these rewards read answers
    argv = sys.argv[:]
    print("== BAR-RAG generator reward")
    main(__doc__.splitlines()[0], compute_generator_score, generator_completion, 5, "evidence passages")
    sys.argv = argv
    print("== ARENA reward")
    main(__doc__.splitlines()[0], arena_score, arena_completion, 10, "references")
