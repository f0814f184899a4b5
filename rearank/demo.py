"""``make demo``: rerank the first few dl19 queries with the embedded SmolLM2-135M on CPU, in a few minutes.

Runs ``rearank rerank`` with small settings (few queries, short passages, a small generation budget)
and prints nDCG@10 before and after, LLM calls, tokens and where the files are. The 135M model only
shows the mechanics: it ranks near chance. Real use is a 7B reasoning reranker on vLLM.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

# Idle OpenMP threads must not spin: on a busy 2-core machine spinning made CPU inference ~8x slower.
# Set before anything imports torch.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from rearank.cli import main as cli_main
from rearank.flags import add_renamed
from rearank.window import schedule

NOTE = """\
rearank demo: listwise reasoning reranking of {queries} dl19 queries (BM25 top-{top_k}) with the embedded
SmolLM2-135M-Instruct on CPU (hf backend), {windows} windows of 20 passages per query.

This tiny model shows the mechanics only (prompt, batched sliding windows, parsing, run + traces): it ranks
near chance and mostly fails the output format, so expect nDCG@10 to stay near BM25's or drop. Real use is a
7B reasoning reranker (e.g. a Rearank-7B checkpoint) on a GPU with vLLM:
  rearank rerank --dataset dl19 --backend vllm --model PATH_OR_HUB_ID --output run.trec
"""


def demo_args(out: Path, queries: int, top_k: int, max_new_tokens: int, passage_tokens: int) -> list[str]:
    """The ``rearank rerank`` arguments of the demo."""
    return [
        "rerank", "--dataset", "dl19", "--backend", "hf", "--model", "embedded",
        "--max-queries", str(queries), "--top-k", str(top_k), "--window", "20", "--step", "10",
        "--max-passage-tokens", str(passage_tokens), "--max-new-tokens", str(max_new_tokens),
        # the engine sends the windows of all queries together; on CPU, transformers generates them one by one
        # (a padded lock-step batch is slower there), so hf gets micro-batches of 1
        "--batch-size", str(queries), "--backend-option", "batch_size=1", "--output", str(out / "run.trec"),
    ]


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the exit code of ``rearank rerank``."""
    parser = argparse.ArgumentParser(prog="python -m rearank.demo", description=__doc__.splitlines()[0])
    add_renamed(parser, ["--output-dir"], ["--out"], type=Path, default=Path("out/demo"), metavar="DIR",
                help="folder for run, traces and stats")
    parser.add_argument("--queries", type=int, default=5)
    parser.add_argument("--top-k", type=int, default=30)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--max-passage-tokens", type=int, default=48)
    args = parser.parse_args(argv)
    print(NOTE.format(queries=args.queries, top_k=args.top_k, windows=len(schedule(args.top_k))), flush=True)
    started = time.perf_counter()
    code = cli_main(demo_args(args.output_dir, args.queries, args.top_k, args.max_new_tokens, args.max_passage_tokens))
    if code == 0:
        show_first_window(args.output_dir / "run.trec.traces.jsonl")
    print(f"demo finished in {time.perf_counter() - started:.0f}s (model loading included)")
    return code


def show_first_window(traces: Path) -> None:
    """Print what the model wrote for the first window and how it was parsed."""
    with open(traces, encoding="utf-8") as handle:
        first = json.loads(handle.readline())
    text = first["raw_output"].strip().replace("\n", " ")
    print(f"first window (query {first['qid']}, ranks {first['start'] + 1}-{first['end']}): the model wrote "
          f"{text[:160]!r}{'...' if len(text) > 160 else ''} -> parse status {first['status']!r}"
          " (a window without a usable ranking keeps its input order)")


if __name__ == "__main__":
    sys.exit(main())
