"""Throughput of the groupwise reward (rearank.grouprank.reward.compute_score) on one core. Target: 20,000/s.

Completions: ~1,500 characters of reasoning that mentions document ids, then a JSON object of 20 scores
(mostly complete; some with missing ids, out-of-range or float scores, some truncated or without tags).
Ground truth: 20 graded labels as a JSON string. Two cases: "grouped" (32 rollouts share a prompt's ground
truth, as in GRPO) and "distinct" (every completion its own ground truth).

    python bench/bench_grouprank_reward.py [--completions 64000]
"""

from __future__ import annotations

import argparse
import json
import random
import time

from rearank.grouprank.parser import format_scores
from rearank.grouprank.reward import compute_score

N_DOCS = 20
TARGET = 20_000
WORDS = [
    "document", "useful", "answers", "query", "partly", "relevant", "background", "topic", "mentions", "evidence",
    "key", "facts", "unrelated", "compares", "describes", "however", "therefore", "directly", "explains",
]


def make_completion(rng: random.Random) -> str:
    """A reasoning + JSON scores completion with the defects a policy produces early in training."""
    reason = []
    while sum(len(w) + 1 for w in reason) < 1500:
        reason.append(f"[{rng.randint(1, N_DOCS)}]" if rng.random() < 0.06 else rng.choice(WORDS))
    scores: list[float] = [rng.choice((0, 0, 1, 2, 3, 5, 7, 8, 10)) for _ in range(N_DOCS)]
    kind = rng.random()
    if kind < 0.10:  # a few ids left out
        scores = scores[: N_DOCS - 3]
    elif kind < 0.15:  # a score off the scale and a float
        scores[4], scores[7] = 12, 6.5
    answer = format_scores(scores)
    if kind > 0.95:  # truncated inside the JSON
        return f"<reason>{' '.join(reason)}</reason>\n<answer>{answer[: len(answer) // 2]}"
    if kind > 0.90:  # no tags
        return f"{' '.join(reason)}\n{answer}"
    return f"<reason>{' '.join(reason)}</reason>\n<answer>{answer}</answer>"


def make_ground_truth(rng: random.Random) -> str:
    return json.dumps({"labels": [rng.choice((0, 0, 0, 1, 2, 3)) for _ in range(N_DOCS)]})


def run(completions: list[str], truths: list[str]) -> tuple[float, float]:
    """Completions per second over the whole list: per second of CPU time (one core) and of wall time.

    CPU time leaves out the time the process waits for a core, so it measures the reward's own cost on a
    shared machine; on an idle machine the two agree.
    """
    cpu, wall = time.process_time(), time.perf_counter()
    for text, truth in zip(completions, truths):
        compute_score("rearank", text, truth)
    n = len(completions)
    return n / (time.process_time() - cpu), n / (time.perf_counter() - wall)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--completions", type=int, default=64_000)
    parser.add_argument("--group", type=int, default=32, help="rollouts per prompt in the grouped case")
    args = parser.parse_args()
    rng = random.Random(0)
    completions = [make_completion(rng) for _ in range(args.completions)]
    prompts = [make_ground_truth(rng) for _ in range(args.completions // args.group + 1)]
    grouped = [prompts[i // args.group] for i in range(args.completions)]
    distinct = [make_ground_truth(rng) for _ in range(args.completions)]
    mean_len = sum(map(len, completions)) / len(completions)
    print(f"{args.completions} completions, mean {mean_len:.0f} characters, {N_DOCS} documents each")
    cases = ((f"grouped ({args.group} rollouts per ground truth)", grouped), ("distinct ground truths", distinct))
    for name, truths in cases:
        cpu, wall = run(completions, truths)
        verdict = "meets" if cpu >= TARGET else "BELOW"
        print(f"{name + ':':45s} {cpu:,.0f} completions per CPU-second ({verdict} {TARGET:,}/s), "
              f"{wall:,.0f} per wall-second")


if __name__ == "__main__":
    main()
