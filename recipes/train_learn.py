"""``make train-learn``: does GRPO with the project's reward move a model on held-out sets? A CPU benchmark.

TRL's ``GRPOTrainer`` trains the embedded SmolLM2-135M-Instruct on answer-only (``rankgpt``) 5-passage sets
synthesized from dl21, rewarded by ``rearank.reward.compute_score`` (the verl recipe's reward) through the
same wrapper as ``make train-smoke``. Before training and every ``--eval-every`` steps the policy answers
held-out 5-passage sets synthesized from dl19 (other queries, other collection) greedily; each answer is
scored by the same reward and read by the same parser (``rearank.answer.parse_answer``). It records:

* ``mean_reward``: mean ``compute_score`` over the held-out sets;
* ``format_valid``: share of answers the parser reads as ``ok`` (every id once, in range, nothing else wrong);
* ``ndcg``: mean nDCG@10 of the parsed (repaired) permutations;
* ``names_ids``: share of answers naming at least one passage id (parse status other than ``wrong_format``).

It writes ``learn.json`` (settings, every evaluation, the per-step training logs) and ``learn.png`` (the curves)
into ``--output-dir`` and prints which figures rose and which did not. Seeds are fixed; CPU thread timing
still makes runs differ slightly. It shows mechanics on a 135M model; it says nothing about reranking quality.

    python -m recipes.train_learn [--steps 30] [--eval-every 5] [--output-dir bench/out/train_learn]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rearank.answer import parse_answer
from rearank.errors import RearankError
from rearank.reward import compute_score
from recipes.data import synthesize_small
from recipes.train_smoke import rearank_reward, shorten_prompt

SEED = 0
FIGURES = ("mean_reward", "format_valid", "ndcg", "names_ids")


def load_sets(parquets: Sequence[Path], rows: int | None, max_words: int) -> list[dict]:
    """Rows of synthesized parquets as ``{"prompt": messages, "ground_truth": str}``, passages cut to ``max_words``."""
    import pandas as pd

    frame = pd.concat([pd.read_parquet(p) for p in parquets], ignore_index=True)
    if rows is not None:
        frame = frame.sample(n=min(rows, len(frame)), random_state=SEED) if rows < len(frame) else frame
    return [{"prompt": shorten_prompt(row.prompt, max_words), "ground_truth": row.reward_model["ground_truth"]}
            for row in frame.itertuples()]


def score_answers(texts: Sequence[str], sets: Sequence[dict]) -> dict[str, Any]:
    """Mean reward, format-valid rate, mean nDCG@10 and parse statuses of ``texts`` answering ``sets``."""
    scores = [compute_score("rearank", text, s["ground_truth"]) for text, s in zip(texts, sets)]
    statuses = Counter(parse_answer(text, _set_size(s)).status for text, s in zip(texts, sets))
    n = len(scores)
    return {"mean_reward": sum(r["score"] for r in scores) / n, "format_valid": statuses["ok"] / n,
            "ndcg": sum(r["ndcg"] for r in scores) / n, "names_ids": 1 - statuses["wrong_format"] / n,
            "statuses": dict(statuses)}


def _set_size(row: dict) -> int:
    return len(json.loads(row["ground_truth"])["labels"])


def generate(model: Any, tokenizer: Any, sets: Sequence[dict], max_new_tokens: int, batch: int = 16) -> list[str]:
    """Greedy answers of ``model`` to the sets' prompts."""
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


def train(train_sets: list[dict], heldout: list[dict], output_dir: Path, *, steps: int, eval_every: int,
          prompts_per_step: int, generations: int, max_completion_length: int, learning_rate: float,
          beta: float) -> tuple[list[dict], list[dict]]:
    """GRPO for ``steps`` steps, evaluating on ``heldout`` at step 0 and every ``eval_every`` steps."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from rearank.models import embedded_model_path

    torch.manual_seed(SEED)
    model_dir = embedded_model_path()
    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    evals: list[dict] = []

    def evaluate(step: int) -> None:
        began = time.perf_counter()
        figures = score_answers(generate(model, tokenizer, heldout, max_completion_length), heldout)
        evals.append({"step": step, **figures, "eval_s": round(time.perf_counter() - began, 1)})
        print(f"step {step:>4}: held-out reward {figures['mean_reward']:.4f}  format-valid "
              f"{figures['format_valid']:.3f}  nDCG@10 {figures['ndcg']:.4f}  {figures['statuses']}", flush=True)

    class HeldOut(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step % eval_every == 0 or state.global_step == steps:
                evaluate(state.global_step)

    config = GRPOConfig(
        output_dir=str(output_dir), max_steps=steps, per_device_train_batch_size=prompts_per_step * generations,
        num_generations=generations, max_completion_length=max_completion_length, temperature=1.0,
        learning_rate=learning_rate, beta=beta, logging_steps=1, save_strategy="no", report_to="none",
        use_cpu=True, bf16=False, seed=SEED, data_seed=SEED, dataloader_num_workers=0, disable_tqdm=True,
    )
    dataset = Dataset.from_list([{"prompt": s["prompt"], "reward_model": {"ground_truth": s["ground_truth"]}}
                                 for s in train_sets])
    trainer = GRPOTrainer(model=model, reward_funcs=rearank_reward, args=config, processing_class=tokenizer,
                          train_dataset=dataset, callbacks=[HeldOut()])
    evaluate(0)
    trainer.train()
    return evals, [entry for entry in trainer.state.log_history if "reward" in entry]


def verdict(evals: Sequence[dict]) -> list[str]:
    """One plain line per figure: first evaluation -> last, and whether it rose."""
    first, last = evals[0], evals[-1]
    lines = []
    for name in FIGURES:
        change = last[name] - first[name]
        word = "ROSE" if change > 0 else ("DID NOT RISE (unchanged)" if change == 0 else "DID NOT RISE (fell)")
        best = max(e[name] for e in evals)
        lines.append(f"{name}: {first[name]:.4f} at step {first['step']} -> {last[name]:.4f} at step {last['step']} "
                     f"({change:+.4f}, best {best:.4f}): {word}")
    return lines


def plot(evals: Sequence[dict], logs: Sequence[dict], path: Path) -> None:
    """Held-out figures and the training reward against the step, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    steps = [e["step"] for e in evals]
    for name in FIGURES:
        axes[0].plot(steps, [e[name] for e in evals], marker="o", label=name)
    axes[0].set(title="held-out dl19 sets (greedy)", xlabel="GRPO step")
    axes[0].legend()
    axes[1].plot([e["step"] for e in logs], [e["reward"] for e in logs], label="train reward (sampled)")
    axes[1].set(title="training batches (dl21)", xlabel="GRPO step")
    axes[1].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--steps", type=int, default=30, help="GRPO steps")
    parser.add_argument("--eval-every", type=int, default=5, help="evaluate on the held-out sets every N steps")
    parser.add_argument("--heldout", type=int, default=32, help="held-out dl19 sets")
    parser.add_argument("--prompts-per-step", type=int, default=2, help="training prompts per step")
    parser.add_argument("--generations", type=int, default=4, help="completions per prompt (the GRPO group)")
    parser.add_argument("--max-completion-length", type=int, default=32, help="tokens per completion")
    parser.add_argument("--max-words", type=int, default=8, help="words kept per passage")
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--beta", type=float, default=0.04, help="KL penalty")
    parser.add_argument("--output-dir", type=Path, default=Path("bench/out/train_learn"))
    args = parser.parse_args(argv)
    if args.steps < 1 or args.eval_every < 1 or args.heldout < 1:
        print("train-learn: --steps, --eval-every and --heldout must be at least 1", file=sys.stderr)
        return 1

    started = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="rearank-train-learn-") as tmp:
            sets = {}
            for name in ("dl21", "dl19"):
                folder = synthesize_small(Path(tmp) / name, samples_per_query=4, set_size=5, passage_budget="24 tokens",
                                          template="rankgpt", dataset=name)
                sets[name] = [folder / "train.parquet", folder / "val.parquet"]
            train_sets = load_sets(sets["dl21"], None, args.max_words)
            heldout = load_sets(sets["dl19"], args.heldout, args.max_words)
            evals, logs = train(train_sets, heldout, Path(tmp) / "out", steps=args.steps, eval_every=args.eval_every,
                                prompts_per_step=args.prompts_per_step, generations=args.generations,
                                max_completion_length=args.max_completion_length, learning_rate=args.learning_rate,
                                beta=args.beta)
    except RearankError as err:
        print(f"train-learn: {err}", file=sys.stderr)
        return 1
    args.output_dir.mkdir(parents=True, exist_ok=True)
    lines = verdict(evals)
    elapsed = time.perf_counter() - started
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    report = {"settings": {**settings, "seed": SEED, "train_sets": len(train_sets), "heldout_sets": len(heldout)},
              "evaluations": evals, "train_logs": logs, "verdict": lines, "wall_s": round(elapsed)}
    (args.output_dir / "learn.json").write_text(json.dumps(report, indent=1) + "\n")
    plot(evals, logs, args.output_dir / "learn.png")
    print("\n".join(lines))
    print(f"figures: {args.output_dir / 'learn.json'}\ncurve: {args.output_dir / 'learn.png'}\n"
          f"{args.steps} GRPO steps on {len(train_sets)} dl21 sets, {len(heldout)} held-out dl19 sets, "
          f"{elapsed / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
