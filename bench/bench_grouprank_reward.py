"""Throughput of the groupwise reward (rearank.methods.groupwise.reward.compute_score) on one core. Target: 20,000/s.

Completions: ~1,500 characters of reasoning that mentions document ids, then a JSON object of 20 scores
(mostly complete; some with missing ids, out-of-range or float scores, some truncated or without tags).
Ground truth: 20 graded labels as a JSON string. Two cases: "grouped" (32 rollouts share a prompt's ground
truth, as in GRPO) and "distinct" (every completion its own ground truth).

    python bench/bench_grouprank_reward.py [--completions 64000]
"""

from __future__ import annotations

import random

from reward_harness import main, reasoning, tagged

from rearank.methods.groupwise.parser import format_scores
from rearank.methods.groupwise.reward import compute_score

N_DOCS = 20


def make_completion(rng: random.Random) -> str:
    """A reasoning + JSON scores completion with the defects a policy produces early in training."""
    reason = reasoning(rng, N_DOCS)
    scores: list[float] = [rng.choice((0, 0, 1, 2, 3, 5, 7, 8, 10)) for _ in range(N_DOCS)]
    kind = rng.random()
    if kind < 0.10:  # a few ids left out
        scores = scores[: N_DOCS - 3]
    elif kind < 0.15:  # a score off the scale and a float
        scores[4], scores[7] = 12, 6.5
    return tagged(kind, "reason", reason, format_scores(scores))


if __name__ == "__main__":
    main(__doc__.splitlines()[0], compute_score, make_completion, N_DOCS, "documents")
