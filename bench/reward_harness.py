"""Shared harness of the reward benchmarks: one-core throughput of a verl ``compute_score`` on realistic
completions, with ground truths shared by a prompt's rollouts ("grouped", as in GRPO) or all distinct."""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable

#: Completions per second of CPU time a reward must reach: a verl step of 128 prompts x 32 rollouts must not
#: wait on it.
TARGET = 20_000
#: Words the synthetic reasoning is made of.
WORDS = ["passage", "document", "discusses", "query", "relevant", "useful", "mentions", "partially", "answers",
         "topic", "details", "background", "unrelated", "definition", "evidence", "compares", "describes",
         "however", "therefore", "directly", "explains"]


def reasoning(rng: random.Random, n_ids: int, chars: int = 1500) -> str:
    """About ``chars`` characters of reasoning that mentions ids ``[1]..[n_ids]`` now and then."""
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < chars:
        words.append(f"[{rng.randint(1, n_ids)}]" if rng.random() < 0.06 else rng.choice(WORDS))
    return " ".join(words)


def tagged(kind: float, tag: str, thought: str, answer: str) -> str:
    """``<tag>thought</tag>`` then ``<answer>answer</answer>``, or for a draw ``kind`` above 0.95 cut inside the
    answer, above 0.90 without tags: the format defects a policy produces early in training."""
    if kind > 0.95:  # truncated inside the answer
        return f"<{tag}>{thought}</{tag}>\n<answer>{answer[: len(answer) // 2]}"
    if kind > 0.90:  # no tags
        return f"{thought}\n{answer}"
    return f"<{tag}>{thought}</{tag}>\n<answer>{answer}</answer>"


def make_ground_truth(rng: random.Random, n: int) -> str:
    """``n`` graded labels (mostly 0) as the synthesized parquet stores them: a JSON string."""
    return json.dumps({"labels": [rng.choice((0, 0, 0, 1, 2, 3)) for _ in range(n)]})


def throughput(score: Callable[..., dict], completions: list[str], truths: list[str]) -> tuple[float, float]:
    """Completions per second of process CPU time (one core, robust to a busy machine) and of wall time."""
    wall, cpu = time.perf_counter(), time.process_time()
    for text, truth in zip(completions, truths):
        score("rearank", text, truth)
    n = len(completions)
    return n / (time.process_time() - cpu), n / (time.perf_counter() - wall)


def main(description: str, score: Callable[..., dict], make_completion: Callable[[random.Random], str],
         n_items: int, items: str) -> None:
    """Parse ``--completions``/``--group``, then print both cases' throughput against :data:`TARGET`."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--completions", type=int, default=64_000)
    parser.add_argument("--group", type=int, default=32, help="rollouts per prompt in the grouped case")
    args = parser.parse_args()
    rng = random.Random(0)
    completions = [make_completion(rng) for _ in range(args.completions)]
    prompts = [make_ground_truth(rng, n_items) for _ in range(args.completions // args.group + 1)]
    grouped = [prompts[i // args.group] for i in range(args.completions)]
    distinct = [make_ground_truth(rng, n_items) for _ in range(args.completions)]
    mean_len = sum(map(len, completions)) / len(completions)
    print(f"{args.completions} completions, mean {mean_len:.0f} characters, {n_items} {items} each")
    for name, truths in ((f"grouped ({args.group} rollouts per ground truth)", grouped),
                         ("distinct ground truths", distinct)):
        cpu, wall = throughput(score, completions, truths)
        verdict = "meets" if cpu >= TARGET else "BELOW"
        print(f"{name + ':':45s} {cpu:,.0f} completions per CPU-second on one core ({verdict} {TARGET:,}/s), "
              f"{wall:,.0f} per wall-second")
