"""RRPO smoke on CPU: train a small pointwise scorer against a gold reader and print the held-out curve.

The scorer is the embedded SmolLM2-135M cut to its first ``--layers`` layers, scored by the log-odds of "yes";
the reader is the ``gold`` (or ``noisy-gold``) reader, so rewards measure only whether the picked passages
carry the evidence. Prints the held-out mean step reward of the reference scorer (= the starting point), then
after every epoch, and the per-step training reward beside the reference's on the same questions.

    python bench/bench_rrpo.py [--train FILE] [--heldout FILE] [--epochs 2] [--k 2] [--layers 2]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import torch

from rearank.data.packs import data_root
from rearank.io.qa import load_qa
from rearank.rag.readers import make_reader
from rearank.rag.rrpo.trainer import RRPOConfig, build_trainer, evaluate_policy


def run(args: argparse.Namespace, output: Path) -> dict:
    reader_options = {"require": args.require} if args.reader == "gold" else {"require": args.require, "p": 0.9}
    reader = make_reader(args.reader, **reader_options)
    config = RRPOConfig(
        data=str(args.train), limit=args.train_limit, output=str(output), scorer="embedded", num_layers=args.layers,
        max_passage_tokens=args.passage_tokens, reader=args.reader, k=args.k, epochs=1, batch_size=args.batch,
        lr=args.lr, ppo_epochs=args.ppo_epochs, save_every=10_000, seed=args.seed, device="cpu",
    )
    heldout = load_qa(args.heldout, limit=args.heldout_limit)
    steps: list[dict] = []

    def log(r: dict) -> None:
        if "heldout" in r:
            return
        steps.append(r)
        print(f"  step {r['step']:3d}  reward {r['reward']:+.3f}  ref {r['ref_reward']:+.3f}  kl {r['kl']:.4f}  "
              f"clip {r['clip_frac']:.2f}", flush=True)

    trainer = build_trainer(config, reader, log=log)
    curve = [("reference", evaluate_policy(trainer.reference, heldout, reader, args.k))]
    print(f"held-out ({len(heldout)} questions) reference: mean step reward "
          f"{curve[0][1]['mean_step_reward']:+.4f}, EM@{args.k} {curve[0][1]['em']:.3f}", flush=True)
    started = time.perf_counter()
    for epoch in range(args.epochs):
        trainer.config.epochs = epoch + 1
        trainer.train(progress=False)
        figures = evaluate_policy(trainer.policy, heldout, reader, args.k)
        curve.append((f"epoch {epoch + 1}", figures))
        mine = [r for r in steps if r["epoch"] == epoch]
        print(f"training epoch {epoch + 1}: mean step reward {sum(r['reward'] for r in mine) / len(mine):+.4f}, "
              f"reference's on the same questions {sum(r['ref_reward'] for r in mine) / len(mine):+.4f}")
        print(f"held-out after epoch {epoch + 1}: mean step reward {figures['mean_step_reward']:+.4f}, "
              f"EM@{args.k} {figures['em']:.3f}  ({time.perf_counter() - started:.0f}s of training)", flush=True)
    print(f"baseline reader calls: {trainer.baseline_calls} (one set per training question, none after epoch 1)")
    return {"curve": curve, "baseline_calls": trainer.baseline_calls, "train_questions": len(trainer.items)}


def main() -> None:
    data = data_root() / "qa" / "hotpotqa"
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", type=Path, default=data / "train_distractor.sample100.json")
    parser.add_argument("--heldout", type=Path, default=data / "dev_distractor.first103.json")
    parser.add_argument("--train-limit", type=int, default=100)
    parser.add_argument("--heldout-limit", type=int, default=50)
    parser.add_argument("--reader", choices=("gold", "noisy-gold"), default="gold")
    parser.add_argument("--require", choices=("any", "all"), default="any")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--k", type=int, default=2)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--passage-tokens", type=int, default=48)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--ppo-epochs", type=int, default=1,
                        help="PPO passes a batch (1: the figures in docs/rag.md; training's default is 4)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    with tempfile.TemporaryDirectory() as tmp:
        run(args, Path(tmp) / "rrpo")


if __name__ == "__main__":
    main()
