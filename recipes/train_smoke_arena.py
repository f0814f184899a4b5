"""A few GRPO steps on CPU with TRL, the embedded SmolLM2-135M-Instruct and the ARENA reward on ARENA rows.

The rows come from ``rearank synth --mode arena`` logic (:mod:`data_synthesis.qa_rows`) on the shared HotpotQA
train sample, with passages cut to a few words so that a step is short; completions are scored by the same
``rearank.rag.arena.reward.compute_score`` as the verl recipe (wrapped in TRL's reward-function signature). It
shows the loop -- sample a group, score, group-normalise, update with a KL penalty -- runs end to end; the 135M
model rarely writes ARENA's three tags, so rewards are mostly 0 and nothing useful is learnt.

    python -m recipes.train_smoke_arena [--steps 2] [--metrics metrics.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rearank.errors import RearankError
from rearank.rag.arena.reward import compute_score

REQUIRED_METRICS = ("reward", "reward_std", "kl", "completions/mean_length", "arena/format", "arena/relevance")


def arena_reward(completions: Sequence[Any], reward_model: Sequence[dict],
                 log_metric: Callable[[str, float], None] | None = None, **kwargs: Any) -> list[float]:
    """TRL reward function: the ARENA ``compute_score`` per completion; logs the mean of each part."""
    texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    results = [compute_score("arena", text, rm["ground_truth"]) for text, rm in zip(texts, reward_model)]
    if log_metric is not None:
        for part in ("format", "accuracy", "relevance"):
            log_metric(f"arena/{part}", sum(r[part] for r in results) / len(results))
    return [r["score"] for r in results]


def arena_dataset(rows: int, max_words: int) -> Any:
    """The first ``rows`` ARENA rows of the HotpotQA train sample, passages cut to ``max_words`` words."""
    from datasets import Dataset

    from data_synthesis.qa_rows import QARowsConfig, qa_rows
    from rearank.io.qa import load_qa

    path = Path(os.environ.get("REARANK_DATA", "../shared/data")) / "qa" / "hotpotqa" / "train_distractor.sample100.json"
    if not path.is_file():
        raise RearankError(f"{path} not found: set REARANK_DATA to the shared data folder")
    made, _ = qa_rows(load_qa(path, limit=rows), QARowsConfig("arena", val_fraction=0.0, max_passage_tokens=max_words))
    return Dataset.from_list([{"prompt": r["prompt"], "reward_model": {"ground_truth": r["reward_model"]["ground_truth"]}}
                              for r in made])


def run_smoke(output_dir: Path, steps: int = 2, generations: int = 4, max_completion_length: int = 48,
              max_words: int = 8) -> list[dict]:
    """Train ``steps`` GRPO steps (one prompt x ``generations`` completions each); return the per-step logs."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from rearank.models import embedded_model_path

    torch.manual_seed(0)
    model_dir = embedded_model_path()
    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    config = GRPOConfig(
        output_dir=str(output_dir), max_steps=steps, per_device_train_batch_size=generations,
        num_generations=generations, max_completion_length=max_completion_length, temperature=0.9,
        learning_rate=3e-6, beta=0.04, logging_steps=1, save_strategy="no", report_to="none", use_cpu=True,
        bf16=False, seed=0, dataloader_num_workers=0, disable_tqdm=True,
    )
    trainer = GRPOTrainer(model=model, reward_funcs=arena_reward, args=config, processing_class=tokenizer,
                          train_dataset=arena_dataset(steps, max_words))
    trainer.train()
    return [entry for entry in trainer.state.log_history if "reward" in entry]


def check_logs(logs: Sequence[dict], steps: int) -> None:
    """Raise unless every step logged the required metrics, all finite."""
    if len(logs) != steps:
        raise RearankError(f"expected {steps} logged steps, got {len(logs)}")
    for entry in logs:
        bad = [m for m in REQUIRED_METRICS if not isinstance(entry.get(m), (int, float)) or not math.isfinite(entry[m])]
        if bad:
            raise RearankError(f"step {entry.get('step')}: missing or non-finite metrics {bad}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2, help="GRPO steps, one prompt each (2)")
    parser.add_argument("--generations", type=int, default=4, help="completions per prompt, the GRPO group (4)")
    parser.add_argument("--max-completion-length", type=int, default=48, help="tokens per completion (48)")
    parser.add_argument("--metrics", type=Path, help="also write the per-step logs to this JSON file")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="rearank-arena-smoke-") as tmp:
            logs = run_smoke(Path(tmp), args.steps, args.generations, args.max_completion_length)
        check_logs(logs, args.steps)
    except RearankError as err:
        print(f"train-smoke-arena: {err}", file=sys.stderr)
        return 1
    print(f"{'step':>4} {'reward':>8} {'std':>6} {'kl':>9} {'len':>6} {'format':>7} {'relev':>6}")
    for e in logs:
        print(f"{e['step']:>4} {e['reward']:>8.3f} {e['reward_std']:>6.3f} {e['kl']:>9.2e} "
              f"{e['completions/mean_length']:>6.1f} {e['arena/format']:>7.3f} {e['arena/relevance']:>6.3f}")
    if args.metrics:
        args.metrics.write_text(json.dumps(logs, indent=1))
    print(f"ARENA train-smoke passed: {args.steps} GRPO steps on CPU in {time.perf_counter() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
