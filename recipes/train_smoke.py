"""``make train-smoke``: a few GRPO steps on CPU with TRL, the embedded SmolLM2-135M-Instruct and the Rearank reward.

The rows are verl parquet rows from the data-synthesis pipeline, scored by the same
``compute_score`` of ``rearank.reward`` as the verl recipe (wrapped in TRL's reward-function signature). To keep a
step short on a laptop CPU the default rows are synthesized from dl21 with 5 passages of at most 24 tokens;
passage turns are further cut to 8 words and completions to 32 tokens. The default prompt is the answer-only
``rankgpt`` template: with the reasoning template SmolLM2-135M writes no passage id within 32 tokens, so every
reward is 0, GRPO's advantages vanish and the policy never moves; answer-only prompts get some ids, so
rewards differ within a group and the update (and the KL) is real. ``--template rearank`` or ``--data DIR``
(first rows of another synthesized parquet) change that. It shows the loop -- sample a group, score,
group-normalise, update with a KL penalty -- runs end to end; it does not train a useful reranker.

    python -m recipes.train_smoke [--data DIR | --template rearank] [--steps 3] [--metrics metrics.json]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rearank.errors import RearankError
from rearank.methods.listwise.reward import compute_score
from recipes.data import synthesize_small

#: Metrics every logged step must carry, finite (TRL names, plus the reward parts logged by rearank_reward).
REQUIRED_METRICS = ("reward", "reward_std", "kl", "completions/mean_length", "rearank/ndcg", "rearank/r_rank")
_PASSAGE_TURN = re.compile(r"\[\d+\] ")


def rearank_reward(completions: Sequence[Any], reward_model: Sequence[dict],
                   log_metric: Callable[[str, float], None] | None = None, **kwargs: Any) -> list[float]:
    """TRL reward function: ``compute_score`` per completion; logs the mean of each reward part."""
    texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    results = [compute_score("rearank", text, rm["ground_truth"]) for text, rm in zip(texts, reward_model)]
    if log_metric is not None:
        for part in ("ndcg", "r_rank", "format_tags", "format_answer"):
            log_metric(f"rearank/{part}", sum(r[part] for r in results) / len(results))
    return [r["score"] for r in results]


def shorten_prompt(messages: Sequence[dict], max_words: int) -> list[dict]:
    """The chat messages with every passage turn (``[i] text``) cut to its first ``max_words`` words."""
    out = []
    for message in messages:
        content = message["content"]
        if message["role"] == "user" and _PASSAGE_TURN.match(content):
            content = " ".join(content.split()[: max_words + 1])  # +1: the "[i]" id
        out.append({"role": message["role"], "content": content})
    return out


def smoke_dataset(parquet: Path, rows: int, max_words: int) -> Any:
    """The first ``rows`` rows of a synthesized parquet as a TRL conversational dataset with short passages."""
    import pandas as pd
    from datasets import Dataset

    frame = pd.read_parquet(parquet).head(rows)
    return Dataset.from_list([
        {"prompt": shorten_prompt(row.prompt, max_words),
         "reward_model": {"ground_truth": row.reward_model["ground_truth"]}}
        for row in frame.itertuples()
    ])


def run_smoke(data_dir: Path, output_dir: Path, steps: int = 3, generations: int = 4, max_completion_length: int = 32,
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
        num_generations=generations, max_completion_length=max_completion_length, temperature=1.0,
        learning_rate=1e-5, beta=0.04, logging_steps=1, save_strategy="no", report_to="none", use_cpu=True,
        bf16=False, seed=0, dataloader_num_workers=0, disable_tqdm=True,
    )
    trainer = GRPOTrainer(model=model, reward_funcs=rearank_reward, args=config, processing_class=tokenizer,
                          train_dataset=smoke_dataset(data_dir / "train.parquet", steps, max_words))
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
    parser.add_argument("--data", type=Path, help="folder with train.parquet (rearank synth); default: 5-passage "
                        "sets synthesized from the dl21 pack into a temporary folder")
    parser.add_argument("--template", default="rankgpt", help="prompt template of the synthesized rows (rankgpt)")
    parser.add_argument("--steps", type=int, default=3, help="GRPO steps, one prompt each (3)")
    parser.add_argument("--generations", type=int, default=4, help="completions per prompt, the GRPO group (4)")
    parser.add_argument("--max-completion-length", type=int, default=32, help="tokens per completion (32)")
    parser.add_argument("--metrics", type=Path, help="also write the per-step logs to this JSON file")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="rearank-train-smoke-") as tmp:
            data_dir = args.data or synthesize_small(Path(tmp) / "data", samples_per_query=1, set_size=5,
                                                     passage_budget="24 tokens", template=args.template)
            if not (data_dir / "train.parquet").is_file():
                raise RearankError(f"{data_dir / 'train.parquet'} not found; make it with `rearank synth`")
            logs = run_smoke(data_dir, Path(tmp) / "out", args.steps, args.generations, args.max_completion_length)
        check_logs(logs, args.steps)
    except RearankError as err:
        print(f"train-smoke: {err}", file=sys.stderr)
        return 1
    print(f"{'step':>4} {'reward':>8} {'std':>6} {'kl':>9} {'len':>6} {'ndcg':>6} {'r_rank':>7}")
    for entry in logs:
        print(f"{entry['step']:>4} {entry['reward']:>8.3f} {entry['reward_std']:>6.3f} {entry['kl']:>9.2e} "
              f"{entry['completions/mean_length']:>6.1f} {entry['rearank/ndcg']:>6.3f} {entry['rearank/r_rank']:>7.3f}")
    if args.metrics:
        args.metrics.write_text(json.dumps(logs, indent=1))
    print(f"train-smoke passed: {args.steps} GRPO steps on CPU in {time.perf_counter() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
