"""Throughput of rearank.methods.listwise.reward.compute_score on realistic completions (one process, one core).

Reported per second of the process's CPU time (a single-threaded loop, so one core), and per wall second.

Completions: ~1,500 characters of reasoning that mentions passage ids, then a 20-id answer (mostly valid
permutations, some with duplicates, missing or out-of-range ids, some truncated or without tags).
Ground truth: 20 graded labels as the synthesized parquet stores them (a JSON string). Two cases:
"grouped" (32 rollouts share a prompt's ground truth, as in GRPO) and "distinct" (every completion its own).

    python bench/bench_reward.py [--completions 64000]
"""

from __future__ import annotations

import random

from reward_harness import main, reasoning, tagged

from rearank.methods.listwise.answer import format_answer
from rearank.methods.listwise.reward import compute_score

N_PASSAGES = 20


def make_completion(rng: random.Random) -> str:
    """A reasoning + answer completion with the defects a policy produces early in training."""
    think = reasoning(rng, N_PASSAGES)
    perm = list(range(N_PASSAGES))
    rng.shuffle(perm)
    kind = rng.random()
    if kind < 0.10:  # duplicates and a missing id
        perm[3] = perm[1]
    elif kind < 0.15:  # out-of-range id
        perm[5] = N_PASSAGES + 3
    return tagged(kind, "think", think, format_answer(perm))


if __name__ == "__main__":
    main(__doc__.splitlines()[0], compute_score, make_completion, N_PASSAGES, "passages")
