"""``make demo``: rerank a few dl19 queries with the embedded SmolLM2-135M on CPU, with and without constrained answers.

Runs ``rearank rerank`` twice with the same small settings (few queries, short passages, 10-passage windows, a
small reasoning budget): once with the model writing freely (``-O constrain=off``), once with its answer constrained
to the method's format (``-O constrain=answer``). Prints, for each, how many windows parsed, tokens per window,
how often the think budget closed the reasoning, and nDCG@10 before and after. The 135M model shows the mechanics
only: it ranks near chance. Real use is a 7B reasoning reranker on vLLM.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from rearank.cli import main as cli_main
from rearank.methods.listwise.window import schedule

NOTE = """\
rearank demo: listwise reasoning reranking of {queries} dl19 queries (BM25 top-{top_k}, windows of {window}, step
{step}: {windows} windows a query) with the embedded SmolLM2-135M-Instruct on CPU (hf backend), twice: the model
writing freely, then with its answer constrained to the format (a permutation of the window's ids in <answer>).
Both runs close the reasoning after {think} tokens (-O max_think_tokens={think}).

This tiny model shows the mechanics only: it ranks near chance, and when its answer is constrained it mostly
repeats the presented order, so expect nDCG@10 to stay near BM25's. Real use is a 7B reasoning reranker (e.g. a
Rearank-7B checkpoint) on a GPU with vLLM:
  rearank rerank --dataset dl19 --backend vllm --model PATH_OR_HUB_ID --output run.trec
"""
MODES = ("off", "answer")


def demo_args(out: Path, args: argparse.Namespace, constrain: str) -> list[str]:
    """The ``rearank rerank`` arguments of one demo run."""
    return [
        "rerank", "--dataset", "dl19", "--backend", "hf", "--model", "embedded",
        "--max-queries", str(args.queries), "--top-k", str(args.top_k), "--window", str(args.window),
        "--step", str(args.step), "--passage-budget", args.passage_budget,
        "--max-new-tokens", str(args.max_new_tokens),
        # the engine sends the windows of all queries together; on CPU, transformers generates them one by one
        # (a padded lock-step batch is slower there), so hf gets micro-batches of 1
        "--batch-size", str(args.queries), "--backend-option", "batch_size=1",
        "--backend-option", f"constrain={constrain}", "--backend-option", f"max_think_tokens={args.max_think_tokens}",
        "--output", str(out / "run.trec"), "--overwrite", "--no-progress",  # a demo run again replaces its runs
    ]


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the exit code of the first ``rearank rerank`` that fails, else 0."""
    parser = argparse.ArgumentParser(prog="python -m rearank.cli.demo", description=__doc__.splitlines()[0],
                                     allow_abbrev=False)
    parser.add_argument("--output-dir", type=Path, default=Path("out/demo"), metavar="DIR",
                        help="folder for the two runs (free/ and constrained/: run, traces and stats)")
    parser.add_argument("--queries", type=int, default=3)
    parser.add_argument("--top-k", type=int, default=20)
    parser.add_argument("--window", type=int, default=10)
    parser.add_argument("--step", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=112)
    parser.add_argument("--max-think-tokens", type=int, default=16)
    parser.add_argument("--passage-budget", default="40t", metavar="BUDGET",
                        help="cut each passage to N characters, words or tokens (e.g. 40t, 200c)")
    args = parser.parse_args(argv)
    windows = len(schedule(args.top_k, args.window, args.step))
    print(NOTE.format(queries=args.queries, top_k=args.top_k, window=args.window, step=args.step, windows=windows,
                      think=args.max_think_tokens), flush=True)
    started = time.perf_counter()
    folders = {mode: args.output_dir / ("constrained" if mode == "answer" else "free") for mode in MODES}
    for mode in MODES:
        print(f"== constrain={mode}", flush=True)
        code = cli_main(demo_args(folders[mode], args, mode))
        if code:
            return code
    print()
    print(report({mode: folders[mode] / "run.trec" for mode in MODES}))
    print(f"demo finished in {time.perf_counter() - started:.0f}s (model loading included)")
    return 0


def report(runs: dict[str, Path]) -> str:
    """A table of the runs (parse rate, tokens per window, budget hits, nDCG@10) and each one's first window."""
    header = (f"{'run':<18} {'parsed ok':>12} {'kept order':>10} {'tokens/window':>13} {'budget hits':>11}   "
              "nDCG@10 before -> after")
    lines = [header]
    firsts = []
    for mode, run in runs.items():
        stats = json.loads(run.with_name(run.name + ".stats.json").read_text(encoding="utf-8"))
        traces = [json.loads(line) for line in run.with_name(run.name + ".traces.jsonl").read_text().splitlines()]
        calls, ok = stats["calls"], stats["status_counts"].get("ok", 0)
        kept = sum(t["permutation"] == sorted(t["permutation"]) for t in traces)
        ndcg = stats.get("ndcg_cut_10") or {}
        scores = f"{ndcg['before']:.4f} -> {ndcg['after']:.4f}" if ndcg else "no judged query"
        lines.append(f"{'constrain=' + mode:<18} {f'{ok}/{calls} ({ok / max(calls, 1):.0%})':>12} {kept:>10} "
                     f"{stats['completion_tokens'] / max(calls, 1):>13.1f} {stats['think_budget_hits']:>11}   {scores}")
        if traces:
            text = traces[0]["raw_output"].strip().replace("\n", " ")
            firsts.append(f"first window with constrain={mode}: {text[-150:]!r} -> {traces[0]['status']!r}")
    lines.append("(kept order: windows whose answer is the presented order; a window that does not parse keeps it "
                 "too)")
    return "\n".join(lines + firsts)


if __name__ == "__main__":
    sys.exit(main())
