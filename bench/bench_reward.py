"""Throughput of rearank.reward.compute_score on realistic completions (one process, one core).

Reported per second of the process's CPU time (a single-threaded loop, so one core), and per wall second.

Completions: ~1,500 characters of reasoning that mentions passage ids, then a 20-id answer (mostly valid
permutations, some with duplicates, missing or out-of-range ids, some truncated or without tags).
Ground truth: 20 graded labels as the synthesized parquet stores them (a JSON string). Two cases:
"grouped" (32 rollouts share a prompt's ground truth, as in GRPO) and "distinct" (every completion its own).

    python bench/bench_reward.py [--completions 64000]
"""

from __future__ import annotations

import argparse
import json
import random
import time

from rearank.answer import format_answer
from rearank.reward import compute_score

N_PASSAGES = 20
WORDS = ["passage", "discusses", "query", "relevant", "mentions", "partially", "answers", "topic", "details",
         "background", "unrelated", "definition", "example", "evidence", "specific", "general", "compares",
         "describes", "however", "therefore", "likely", "directly"]


def make_completion(rng: random.Random) -> str:
    """A reasoning + answer completion with the defects a policy produces early in training."""
    think = []
    while sum(len(w) + 1 for w in think) < 1500:
        think.append(f"[{rng.randint(1, N_PASSAGES)}]" if rng.random() < 0.06 else rng.choice(WORDS))
    perm = list(range(N_PASSAGES))
    rng.shuffle(perm)
    kind = rng.random()
    if kind < 0.10:  # duplicates and a missing id
        perm[3] = perm[1]
    elif kind < 0.15:  # out-of-range id
        perm[5] = N_PASSAGES + 3
    answer = format_answer(perm)
    if kind > 0.95:  # truncated inside the answer
        return f"<think>{' '.join(think)}</think>\n<answer>{answer[: len(answer) // 2]}"
    if kind > 0.90:  # no tags
        return f"{' '.join(think)}\n{answer}"
    return f"<think>{' '.join(think)}</think>\n<answer>{answer}</answer>"


def make_ground_truth(rng: random.Random) -> str:
    labels = [rng.choice((0, 0, 0, 1, 2, 3)) for _ in range(N_PASSAGES)]
    return json.dumps({"labels": labels})


def run(completions: list[str], truths: list[str]) -> tuple[float, float]:
    """Completions per second of process CPU time (one core, robust to a busy machine) and of wall time."""
    wall, cpu = time.perf_counter(), time.process_time()
    for text, truth in zip(completions, truths):
        compute_score("rearank", text, truth)
    return len(completions) / (time.process_time() - cpu), len(completions) / (time.perf_counter() - wall)


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
    print(f"{args.completions} completions, mean {mean_len:.0f} characters, {N_PASSAGES} passages each")
    for name, truths in ((f"grouped ({args.group} rollouts per ground truth)", grouped), ("distinct ground truths", distinct)):
        cpu, wall = run(completions, truths)
        print(f"{name:<40} {cpu:>9,.0f} completions/s of CPU time on one core ({wall:,.0f}/s wall)")


if __name__ == "__main__":
    main()
