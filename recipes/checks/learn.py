"""``make train-learn``: SFT warm start, then GRPO with the project's reward; does GRPO beat SFT on held-out sets?

A CPU benchmark with the embedded SmolLM2-135M-Instruct, built so a 135M model can learn the task:

1. **Data.** 5-passage sets synthesized from dl21 (training) and dl19 (held out: other queries, other
   collection, never trained on) by the data-synthesis pipeline with the answer-only ``rankgpt`` template,
   passages cut to ``--passage-tokens`` tokens and the presented order shuffled (``rearank synth --order shuffle``,
   so keeping the presented order gives no ranking for free). dl21's training split is shuffled once; the first
   ``--sft-rows`` sets feed SFT, the remaining ones GRPO.
2. **SFT warm start** (TRL ``SFTTrainer``) on the synthesized SFT rows (``rearank synth --sft``: target = the
   ideal permutation in the ``<think></think><answer>…</answer>`` shape), loss on the completion only.
3. **GRPO** (TRL ``GRPOTrainer``) from the SFT model, rewarded by ``rearank.methods.listwise.reward.compute_score`` (the
   reward verl's recipe uses) through the ``make train-smoke`` wrapper.

The base model, the SFT model and the GRPO policy every ``--eval-every`` steps answer the held-out sets greedily;
each answer is scored by the same reward and read by the same parser (``rearank.methods.listwise.answer.parse_answer``):
``mean_reward``, ``format_valid`` (parse status ``ok``), ``ndcg`` (nDCG@10 of the repaired permutation),
``kept_order`` (answers that keep the presented order). GRPO's end and SFT's end are compared set by set with a
paired randomization test (``rearank.measures.significance``). The JSON (settings, evaluations, per-set held-out
rewards, the paired test, training logs, stage times) and the PNG of the curves are written with
write-then-rename. Seeds are fixed; CPU thread timing still makes runs differ slightly. It shows what the
training mechanics do to a 135M model on 5-passage windows; it says nothing about a 7B model on 20 passages.

    python -m recipes.checks.learn [--sft-steps 20] [--grpo-steps 12] [--eval-every 6] [--heldout 48]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import resource
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rearank.errors import RearankError
from rearank.io.files import atomic_path, atomic_write, iter_json_lines
from rearank.methods.listwise.answer import parse_answer
from rearank.methods.listwise.reward import compute_score
from recipes.checks import data
from recipes.checks.models import embedded_policy
from recipes.checks.smoke import rearank_reward

SEED = 0
SET_SIZE = 5
FIGURES = ("mean_reward", "format_valid", "ndcg", "kept_order")
DEFAULT_OUTPUT = Path("docs/figures/train_learn.json")


def synthesize_sets(output_dir: Path, dataset: str, samples_per_query: int, passage_tokens: int,
                    val_fraction: float) -> Path:
    """5-passage, shuffled-order, answer-only sets of ``dataset`` with SFT rows, as
    ``rearank synth --dataset D --set-size 5 --order shuffle --template rankgpt --sft`` writes them."""
    return data.synthesize_sets(output_dir, dataset, samples_per_query=samples_per_query, set_size=SET_SIZE,
                                order="shuffle", template="rankgpt", passage_budget=f"{passage_tokens} tokens",
                                sft=True, val_fraction=val_fraction)


def load_rows(sft_jsonl: Path) -> list[dict]:
    """SFT rows as ``{"prompt", "completion", "ground_truth"}``, each with the reward's ground truth of the same set
    from the RL parquet beside it (``sft_train.jsonl`` -> ``train.parquet``), so one row serves SFT, GRPO and
    evaluation."""
    import pandas as pd

    truths = {(row.extra_info["qid"], int(row.extra_info["set_index"])): row.reward_model["ground_truth"]
              for row in pd.read_parquet(sft_jsonl.parent / sft_jsonl.name.replace("sft_", "").replace(
                  ".jsonl", ".parquet")).itertuples()}
    rows = []
    for _, row in iter_json_lines(sft_jsonl):
        key = (row["extra_info"]["qid"], int(row["extra_info"]["set_index"]))
        rows.append({"prompt": row["prompt"], "completion": row["completion"], "ground_truth": truths[key]})
    return rows


def score_answers(texts: Sequence[str], sets: Sequence[dict]) -> dict[str, Any]:
    """Mean reward, format-valid rate, mean nDCG@10, kept-order rate, parse statuses and per-set rewards."""
    scores = [compute_score("rearank", text, s["ground_truth"]) for text, s in zip(texts, sets)]
    parsed = [parse_answer(text, SET_SIZE) for text in texts]
    statuses = Counter(p.status for p in parsed)
    n = len(scores)
    return {"mean_reward": sum(r["score"] for r in scores) / n, "format_valid": statuses["ok"] / n,
            "ndcg": sum(r["ndcg"] for r in scores) / n,
            "kept_order": sum(p.permutation == tuple(range(SET_SIZE)) for p in parsed) / n,
            "statuses": dict(statuses), "rewards": [r["score"] for r in scores]}


def generate(model: Any, tokenizer: Any, sets: Sequence[dict], max_new_tokens: int, batch: int = 64) -> list[str]:
    """Greedy answers of ``model`` to the sets' prompts (large batches: on a busy CPU each decoding step costs
    about as much at batch 64 as at batch 8)."""
    import torch

    texts: list[str] = []
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for start in range(0, len(sets), batch):
            chunk = [s["prompt"] for s in sets[start:start + batch]]
            enc = tokenizer.apply_chat_template(chunk, add_generation_prompt=True, return_tensors="pt",
                                                padding=True, return_dict=True)
            out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False,
                                 pad_token_id=tokenizer.pad_token_id)
            texts += tokenizer.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    model.train(was_training)
    return texts


class Evaluator:
    """Greedy held-out evaluations, appended to ``self.evaluations`` and printed as they come."""

    def __init__(self, model: Any, tokenizer: Any, heldout: Sequence[dict], max_new_tokens: int) -> None:
        self.model, self.tokenizer, self.heldout, self.max_new_tokens = model, tokenizer, heldout, max_new_tokens
        self.evaluations: list[dict] = []
        self.examples: dict[str, list[str]] = {}

    def __call__(self, stage: str, step: int) -> dict:
        began = time.perf_counter()
        texts = generate(self.model, self.tokenizer, self.heldout, self.max_new_tokens)
        figures = {"stage": stage, "step": step, **score_answers(texts, self.heldout),
                   "eval_s": round(time.perf_counter() - began, 1)}
        self.evaluations.append(figures)
        self.examples[f"{stage}@{step}"] = texts[:3]
        print(f"[{stage} step {step:>3}] held-out reward {figures['mean_reward']:+.4f}  format-valid "
              f"{figures['format_valid']:.3f}  nDCG@10 {figures['ndcg']:.4f}  kept order {figures['kept_order']:.3f}"
              f"  {figures['statuses']}  ({figures['eval_s']}s)", flush=True)
        return figures


def freeze_lower_layers(model: Any, trainable_layers: int) -> int:
    """Train only the top ``trainable_layers`` decoder layers and the final norm (0 or less: train everything);
    the backward pass then stops there, which is most of a CPU step. Returns the trainable parameter count."""
    layers = model.model.layers
    if 0 < trainable_layers < len(layers):
        for param in model.parameters():
            param.requires_grad_(False)
        for module in (*layers[len(layers) - trainable_layers:], model.model.norm):
            for param in module.parameters():
                param.requires_grad_(True)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def run_sft(model: Any, tokenizer: Any, rows: Sequence[dict], output_dir: Path, args: argparse.Namespace) -> list[dict]:
    """TRL SFT on prompt/completion rows (loss on the completion); returns the logged losses."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    config = SFTConfig(
        output_dir=str(output_dir), max_steps=args.sft_steps, per_device_train_batch_size=args.sft_batch,
        learning_rate=args.sft_learning_rate, lr_scheduler_type="constant", logging_steps=5, save_strategy="no",
        report_to="none", use_cpu=True, bf16=False, seed=SEED, data_seed=SEED, dataloader_num_workers=0,
        disable_tqdm=True, gradient_checkpointing=False, completion_only_loss=True, max_length=1024,
    )
    dataset = Dataset.from_list([{"prompt": r["prompt"], "completion": r["completion"]} for r in rows])
    trainer = SFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer)
    trainer.train()
    return [{k: v for k, v in e.items() if k in ("step", "loss", "mean_token_accuracy")}
            for e in trainer.state.log_history if "loss" in e]


def run_grpo(model: Any, tokenizer: Any, rows: Sequence[dict], output_dir: Path, args: argparse.Namespace,
             evaluate: Evaluator) -> list[dict]:
    """TRL GRPO with the project's reward, evaluating every ``--eval-every`` steps; returns the step logs."""
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    steps, every = args.grpo_steps, args.eval_every

    class HeldOut(TrainerCallback):
        def on_step_end(self, train_args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step % every == 0 or state.global_step == steps:
                evaluate("grpo", state.global_step)

    config = GRPOConfig(
        output_dir=str(output_dir), max_steps=steps, per_device_train_batch_size=args.prompts_per_step * args.generations,
        num_generations=args.generations, max_completion_length=args.max_completion_length,
        temperature=args.temperature, learning_rate=args.grpo_learning_rate, lr_scheduler_type="constant",
        beta=args.beta, loss_type="dapo", scale_rewards="group", logging_steps=1, save_strategy="no", report_to="none",
        use_cpu=True, bf16=False, seed=SEED, data_seed=SEED, dataloader_num_workers=0, disable_tqdm=True,
        gradient_checkpointing=False,
    )
    dataset = Dataset.from_list([{"prompt": r["prompt"], "reward_model": {"ground_truth": r["ground_truth"]}}
                                 for r in rows])
    trainer = GRPOTrainer(model=model, reward_funcs=rearank_reward, args=config, processing_class=tokenizer,
                          train_dataset=dataset, callbacks=[HeldOut()])
    trainer.train()
    keys = ("step", "reward", "reward_std", "kl", "loss", "grad_norm", "completions/mean_length", "rearank/ndcg",
            "rearank/r_rank", "rearank/format_answer", "frac_reward_zero_std")
    return [{k: e[k] for k in keys if k in e} for e in trainer.state.log_history if "reward" in e]


def paired_test(evaluations: Sequence[dict]) -> dict[str, Any]:
    """GRPO's last evaluation against SFT's, paired over the held-out sets."""
    import numpy as np

    from rearank.measures.significance import paired_t_p, randomization_p

    sft = next(e for e in evaluations if e["stage"] == "sft")
    end = [e for e in evaluations if e["stage"] == "grpo"][-1]
    a, b = np.array(sft["rewards"]), np.array(end["rewards"])
    diff = b - a
    return {"baseline": "sft", "candidate": f"grpo step {end['step']}", "sets": int(a.size),
            "test": "two-sided paired randomization (sign flips, 10,000)", "p_value": randomization_p(a, b),
            "t_test_p": paired_t_p(a, b), "mean_gain": float(diff.mean()),
            "sets_better": int((diff > 0).sum()), "sets_worse": int((diff < 0).sum())}


def verdict(evaluations: Sequence[dict], test: dict) -> list[str]:
    """Plain lines: each figure base -> SFT -> GRPO end, and whether GRPO beat SFT significantly."""
    base, sft = (next(e for e in evaluations if e["stage"] == s) for s in ("base", "sft"))
    end = [e for e in evaluations if e["stage"] == "grpo"][-1]
    lines = []
    for name in FIGURES:
        change = end[name] - sft[name]
        word = "rose" if change > 0 else ("unchanged" if change == 0 else "fell")
        lines.append(f"{name}: base {base[name]:.4f} -> SFT {sft[name]:.4f} -> GRPO step {end['step']} "
                     f"{end[name]:.4f} (GRPO vs SFT {change:+.4f}: {word})")
    significant = test["mean_gain"] > 0 and test["p_value"] < 0.05
    lines.append(f"GRPO vs SFT over {test['sets']} held-out sets: mean reward gain {test['mean_gain']:+.4f}, "
                 f"p = {test['p_value']:.4f} ({'significant' if significant else 'NOT significant'} at 0.05)")
    lines.append(f"format-valid after SFT {sft['format_valid']:.3f}: "
                 f"{'meets' if sft['format_valid'] >= 0.9 else 'BELOW'} the 0.9 target")
    return lines


def plot(evaluations: Sequence[dict], logs: Sequence[dict], sft_steps: int, path: Path) -> None:
    """Held-out figures against the training step (SFT steps, then GRPO steps), and GRPO's training reward."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def x(e: dict) -> int:
        return {"base": 0, "sft": sft_steps}.get(e["stage"], sft_steps + e["step"])

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for name in FIGURES:
        axes[0].plot([x(e) for e in evaluations], [e[name] for e in evaluations], marker="o", label=name)
    axes[0].axvline(sft_steps, color="grey", linestyle=":", label="SFT end / GRPO start")
    axes[0].set(title="held-out dl19 sets (greedy)", xlabel="training step (SFT, then GRPO)")
    axes[0].legend(fontsize=8)
    axes[1].plot([e["step"] for e in logs], [e["reward"] for e in logs], label="sampled reward")
    axes[1].plot([e["step"] for e in logs], [e.get("rearank/ndcg", math.nan) for e in logs], label="sampled nDCG@10")
    axes[1].set(title="GRPO training batches (dl21)", xlabel="GRPO step")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--samples-per-query", type=int, default=40, help="dl21 sets drawn per query")
    parser.add_argument("--heldout-samples-per-query", type=int, default=4, help="dl19 sets drawn per query")
    parser.add_argument("--heldout", type=int, default=48, help="held-out dl19 sets evaluated")
    parser.add_argument("--passage-tokens", type=int, default=16, help="tokens kept per passage")
    parser.add_argument("--sft-rows", type=int, default=480, help="dl21 sets for SFT (the rest feed GRPO)")
    parser.add_argument("--sft-steps", type=int, default=20, help="SFT optimizer steps")
    parser.add_argument("--sft-batch", type=int, default=4, help="SFT rows per step")
    parser.add_argument("--sft-learning-rate", type=float, default=2e-4)
    parser.add_argument("--grpo-steps", type=int, default=12, help="GRPO steps")
    parser.add_argument("--eval-every", type=int, default=6, help="evaluate the GRPO policy every N steps")
    parser.add_argument("--prompts-per-step", type=int, default=2, help="training prompts per GRPO step")
    parser.add_argument("--generations", type=int, default=8, help="completions per prompt (the GRPO group)")
    parser.add_argument("--temperature", type=float, default=1.0, help="GRPO sampling temperature")
    parser.add_argument("--max-completion-length", type=int, default=40, help="tokens per completion")
    parser.add_argument("--grpo-learning-rate", type=float, default=1e-4)
    parser.add_argument("--beta", type=float, default=0.0, help="KL penalty (0: no reference model)")
    parser.add_argument("--trainable-layers", type=int, default=6,
                        help="train the top N of the 30 decoder layers (0: all)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT,
                        help="figures JSON; the PNG goes beside it with the suffix .png")
    return parser


def check_args(args: argparse.Namespace) -> None:
    positive = ("samples_per_query", "heldout_samples_per_query", "heldout", "passage_tokens", "sft_rows",
                "sft_steps", "sft_batch", "grpo_steps", "eval_every", "prompts_per_step", "max_completion_length")
    bad = [f"--{name.replace('_', '-')}" for name in positive if getattr(args, name) < 1]
    if bad:
        raise RearankError(f"{', '.join(bad)} must be at least 1")
    if args.generations < 2:
        raise RearankError("--generations must be at least 2 (GRPO compares completions within a group)")
    if args.output.suffix != ".json":
        raise RearankError(f"--output {args.output}: give a .json path (the PNG goes beside it)")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    started = time.perf_counter()
    times: dict[str, float] = {}
    try:
        check_args(args)
        with tempfile.TemporaryDirectory(prefix="rearank-train-learn-") as tmp:
            train_dir = synthesize_sets(Path(tmp) / "dl21", "dl21", args.samples_per_query, args.passage_tokens, 0.1)
            held_dir = synthesize_sets(Path(tmp) / "dl19", "dl19", args.heldout_samples_per_query,
                                       args.passage_tokens, 0.0)
            train_rows = load_rows(train_dir / "sft_train.jsonl")
            random.Random(SEED).shuffle(train_rows)
            sft_rows, grpo_rows = train_rows[:args.sft_rows], train_rows[args.sft_rows:]
            heldout = load_rows(held_dir / "sft_train.jsonl")
            heldout = random.Random(SEED).sample(heldout, min(args.heldout, len(heldout)))
            if not grpo_rows:
                raise RearankError(f"--sft-rows {args.sft_rows} leaves no dl21 set for GRPO "
                                   f"({len(train_rows)} synthesized); lower it or raise --samples-per-query")
            times["data_s"] = round(time.perf_counter() - started)
            print(f"data: {len(sft_rows)} SFT / {len(grpo_rows)} GRPO dl21 sets, {len(heldout)} held-out dl19 sets",
                  flush=True)

            model, tokenizer = embedded_policy(SEED)
            trainable = freeze_lower_layers(model, args.trainable_layers)
            evaluate = Evaluator(model, tokenizer, heldout, args.max_completion_length)
            evaluate("base", 0)
            mark = time.perf_counter()
            sft_logs = run_sft(model, tokenizer, sft_rows, Path(tmp) / "sft", args)
            times["sft_s"] = round(time.perf_counter() - mark)
            evaluate("sft", args.sft_steps)
            mark = time.perf_counter()
            grpo_logs = run_grpo(model, tokenizer, grpo_rows, Path(tmp) / "grpo", args, evaluate)
            times["grpo_s"] = round(time.perf_counter() - mark)  # includes the evaluations inside it
    except RearankError as err:
        print(f"train-learn: {err}", file=sys.stderr)
        return 1

    evaluations = evaluate.evaluations
    test = paired_test(evaluations)
    lines = verdict(evaluations, test)
    times["wall_s"] = round(time.perf_counter() - started)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    times["cpu_s"] = round(usage.ru_utime + usage.ru_stime)  # CPU time of this process, all threads
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    report = {
        "settings": {**settings, "seed": SEED, "set_size": SET_SIZE, "template": "rankgpt", "order": "shuffle",
                     "trainable_parameters": trainable, "sft_sets": len(sft_rows), "grpo_sets": len(grpo_rows),
                     "heldout_sets": len(heldout)},
        "evaluations": [{k: v for k, v in e.items() if k != "rewards"} for e in evaluations],
        "paired_test": test, "verdict": lines, "times": times,
        "heldout_rewards": {f"{e['stage']}@{e['step']}": e["rewards"] for e in evaluations},
        "examples": evaluate.examples, "sft_logs": sft_logs, "grpo_logs": grpo_logs,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(args.output) as out:
        out.write(json.dumps(report, indent=1) + "\n")
    plot(evaluations, grpo_logs, args.sft_steps, args.output.with_suffix(".png"))
    print("\n".join(lines))
    print(f"figures: {args.output}\ncurve: {args.output.with_suffix('.png')}\nwall {times['wall_s'] / 60:.1f} min, CPU {times['cpu_s'] / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
