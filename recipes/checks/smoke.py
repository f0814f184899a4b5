"""``make train-smoke``: a few GRPO steps on CPU with TRL, the embedded SmolLM2-135M-Instruct and a recipe's reward.

``--family rearank`` (the default): verl parquet rows from the data-synthesis pipeline, scored by the same
``compute_score`` of ``rearank.methods.listwise.reward`` as the verl recipe (wrapped in TRL's reward-function
signature). To keep a step short on a laptop CPU the default rows are synthesized from dl21 with 5 passages of at most 24 tokens;
passage turns are further cut to 8 words and completions to 32 tokens. The default prompt is the answer-only
``rankgpt`` template: with the reasoning template SmolLM2-135M writes no passage id within 32 tokens, so every
reward is 0, GRPO's advantages vanish and the policy never moves; answer-only prompts get some ids, so
rewards differ within a group and the update (and the KL) is real. ``--template rearank`` or ``--data DIR``
(first rows of another synthesized parquet) change that.

``--family arena``: ARENA rows made as ``rearank synth --method arena`` makes them (:mod:`data_synthesis.qa_rows`)
from the shared HotpotQA train sample, passages cut to a few words, scored by ``rearank.methods.arena.reward``'s
``compute_score``; the 135M model rarely writes ARENA's three tags, so rewards are mostly 0.

Either shows the loop -- sample a group, score, group-normalise, update with a KL penalty -- runs end to end; it
does not train a useful model.

    python -m recipes.checks.smoke [--family arena] [--data DIR | --template rearank] [--steps 3] [--metrics m.json]
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rearank.errors import RearankError
from rearank.methods.arena.reward import compute_score as arena_score
from rearank.methods.listwise.reward import compute_score
from recipes.checks.data import shared, synthesize_small
from recipes.checks.models import embedded_policy
from recipes.checks.table import QA, STAGES, Smoke

#: Metrics every logged step must carry, finite (TRL's names), beside its family's table metrics.
COMMON_METRICS = ("reward", "reward_std", "kl", "completions/mean_length")
_PASSAGE_TURN = re.compile(r"\[\d+\] ")


def _score(compute: Callable[..., dict], family: str, completions: Sequence[Any], reward_model: Sequence[dict],
           log_metric: Callable[[str, float], None] | None) -> list[float]:
    """``compute`` per completion (TRL's reward-function arguments); logs the mean of each of the family's parts."""
    parts = STAGES[family].smoke.parts
    texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    results = [compute(family, text, rm["ground_truth"]) for text, rm in zip(texts, reward_model)]
    if log_metric is not None:
        for part in parts:
            log_metric(f"{family}/{part}", sum(r[part] for r in results) / len(results))
    return [r["score"] for r in results]


def rearank_reward(completions: Sequence[Any], reward_model: Sequence[dict],
                   log_metric: Callable[[str, float], None] | None = None, **kwargs: Any) -> list[float]:
    """TRL reward function: ``compute_score`` per completion; logs the mean of each reward part."""
    return _score(compute_score, "rearank", completions, reward_model, log_metric)


def arena_reward(completions: Sequence[Any], reward_model: Sequence[dict],
                 log_metric: Callable[[str, float], None] | None = None, **kwargs: Any) -> list[float]:
    """TRL reward function: the ARENA ``compute_score`` per completion; logs the mean of each part."""
    return _score(arena_score, "arena", completions, reward_model, log_metric)


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


def rearank_dataset(args: argparse.Namespace, scratch: Path, max_words: int = 8) -> Any:
    """``--data``'s rows, or 5-passage rankgpt sets (``--template``) synthesized from dl21 into ``scratch``."""
    data_dir = args.data or synthesize_small(scratch / "data", samples_per_query=1, set_size=5,
                                             passage_budget="24 tokens", template=args.template or "rankgpt")
    if not (data_dir / "train.parquet").is_file():
        raise RearankError(f"{data_dir / 'train.parquet'} not found; make it with `rearank synth`")
    return smoke_dataset(data_dir / "train.parquet", args.steps, max_words)


def arena_dataset(args: argparse.Namespace, scratch: Path, max_words: int = 8) -> Any:
    """The first ``--steps`` ARENA rows of the HotpotQA train sample, passages cut to ``max_words`` words."""
    from datasets import Dataset

    from data_synthesis.qa_rows import QARowsConfig, qa_rows
    from rearank.io.qa import load_qa

    path = shared(QA)
    config = QARowsConfig("arena", val_fraction=0.0, max_passage_tokens=max_words)
    made, _ = qa_rows(load_qa(path, limit=args.steps), config)
    return Dataset.from_list([{"prompt": r["prompt"], "reward_model": {"ground_truth": r["reward_model"]["ground_truth"]}}
                              for r in made])


@dataclass(frozen=True)
class Family:
    """A recipe family's smoke run: its TRL reward, its rows and its settings in the table."""

    reward: Callable[..., list[float]]
    dataset: Callable[[argparse.Namespace, Path], Any]
    settings: Smoke

    @property
    def required_metrics(self) -> tuple[str, ...]:
        return COMMON_METRICS + tuple(metric for _, metric, _ in self.settings.table)


FAMILIES = {"rearank": Family(rearank_reward, rearank_dataset, STAGES["rearank"].smoke),
            "arena": Family(arena_reward, arena_dataset, STAGES["arena"].smoke)}


def run_smoke(family: Family, dataset: Any, output_dir: Path, steps: int, generations: int = 4,
              max_completion_length: int = 32) -> list[dict]:
    """Train ``steps`` GRPO steps (one prompt x ``generations`` completions each); return the per-step logs."""
    from trl import GRPOConfig, GRPOTrainer

    model, tokenizer = embedded_policy()
    config = GRPOConfig(
        output_dir=str(output_dir), max_steps=steps, per_device_train_batch_size=generations,
        num_generations=generations, max_completion_length=max_completion_length, temperature=family.settings.temperature,
        learning_rate=family.settings.learning_rate, beta=0.04, logging_steps=1, save_strategy="no", report_to="none",
        use_cpu=True, bf16=False, seed=0, dataloader_num_workers=0, disable_tqdm=True,
    )
    trainer = GRPOTrainer(model=model, reward_funcs=family.reward, args=config, processing_class=tokenizer,
                          train_dataset=dataset)
    trainer.train()
    return [entry for entry in trainer.state.log_history if "reward" in entry]


def check_logs(logs: Sequence[dict], steps: int, required: Sequence[str]) -> None:
    """Raise unless every step logged the ``required`` metrics, all finite."""
    if len(logs) != steps:
        raise RearankError(f"expected {steps} logged steps, got {len(logs)}")
    for entry in logs:
        bad = [m for m in required if not isinstance(entry.get(m), (int, float)) or not math.isfinite(entry[m])]
        if bad:
            raise RearankError(f"step {entry.get('step')}: missing or non-finite metrics {bad}")


def print_table(family: Family, logs: Sequence[dict]) -> None:
    """One line a step: reward, its std, KL, completion length and the family's own metrics."""
    print(f"{'step':>4} {'reward':>8} {'std':>6} {'kl':>9} {'len':>6} "
          + " ".join(f"{header:>{width}}" for header, _, width in family.settings.table))
    for e in logs:
        print(f"{e['step']:>4} {e['reward']:>8.3f} {e['reward_std']:>6.3f} {e['kl']:>9.2e} "
              f"{e['completions/mean_length']:>6.1f} "
              + " ".join(f"{e[metric]:>{width}.3f}" for _, metric, width in family.settings.table))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", choices=FAMILIES, default="rearank", help="whose reward and rows (rearank)")
    parser.add_argument("--data", type=Path, help="rearank: folder with train.parquet (rearank synth); default: "
                        "5-passage sets synthesized from the dl21 pack into a temporary folder")
    parser.add_argument("--template", help="rearank: prompt template of the synthesized rows (rankgpt)")
    parser.add_argument("--steps", type=int, help="GRPO steps, one prompt each (rearank 3, arena 2)")
    parser.add_argument("--generations", type=int, default=4, help="completions per prompt, the GRPO group (4)")
    parser.add_argument("--max-completion-length", type=int, help="tokens per completion (rearank 32, arena 48)")
    parser.add_argument("--metrics", type=Path, help="also write the per-step logs to this JSON file")
    args = parser.parse_args(argv)
    family = FAMILIES[args.family]
    if args.family != "rearank" and (args.data or args.template):
        parser.error("--data and --template go with --family rearank")
    if args.steps is None:
        args.steps = family.settings.steps
    if args.max_completion_length is None:
        args.max_completion_length = family.settings.max_completion_length

    started = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="rearank-train-smoke-") as tmp:
            dataset = family.dataset(args, Path(tmp))
            logs = run_smoke(family, dataset, Path(tmp) / "out", args.steps, args.generations,
                             args.max_completion_length)
        check_logs(logs, args.steps, family.required_metrics)
    except RearankError as err:
        print(f"train-smoke: {err}", file=sys.stderr)
        return 1
    print_table(family, logs)
    if args.metrics:
        args.metrics.write_text(json.dumps(logs, indent=1))
    print(f"train-smoke ({args.family}) passed: {args.steps} GRPO steps on CPU in {time.perf_counter() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
