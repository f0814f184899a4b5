"""Time evaluation of a 100,000-line run (1,000 queries x 100): `rearank eval` end to end, and in process.

The run and qrels replicate the dl19 pack's BM25 run and judgments under new qids, so the work is that of a
real run. Target: under 2 s end to end. Usage: python bench/bench_eval.py [--queries 1000]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rearank.io.trec import read_qrels, read_run, write_qrels, write_run
from rearank.measures.ir import evaluate

ROOT = Path(__file__).resolve().parents[1]


def dl19_folder() -> Path:
    root = Path(os.environ.get("REARANK_DATA") or ROOT.parent / "shared" / "data")
    folder = root / "msmarco-v1-passage" / "dl19"
    if not folder.is_dir():
        sys.exit(f"bench_eval: the dl19 pack is not at {folder}; set REARANK_DATA to the packs folder")
    return folder


def build(folder: Path, out: Path, queries: int) -> tuple[Path, Path, int]:
    """Write a run of ``queries`` x 100 lines and matching qrels by cycling through dl19's queries."""
    run, qrels = read_run(folder / "run.bm25.top100.trec"), read_qrels(folder / "qrels.txt")
    qids = list(run)
    big_run, big_qrels = {}, {}
    for i in range(queries):
        qid = qids[i % len(qids)]
        big_run[f"{qid}-{i}"] = run[qid]
        big_qrels[f"{qid}-{i}"] = qrels[qid]
    write_run(out / "run.trec", big_run, tag="bench")
    write_qrels(out / "qrels.txt", big_qrels)
    lines = sum(len(r) for r in big_run.values())
    return out / "run.trec", out / "qrels.txt", lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3, help="timed repetitions (best is reported)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_path, qrels_path, lines = build(dl19_folder(), Path(tmp), args.queries)
        print(f"run: {lines:,} lines, {args.queries:,} queries")

        cli = [sys.executable, "-m", "rearank", "eval", "--qrels", str(qrels_path), "--run", str(run_path),
               "--format", "json"]
        cpu_before = _children_cpu()
        best_cli = min(_timed(lambda: subprocess.run(cli, check=True, capture_output=True)) for _ in range(args.repeat))
        cpu = (_children_cpu() - cpu_before) / args.repeat
        print(f"rearank eval (subprocess, end to end, default measures): {best_cli:.2f} s wall (best of "
              f"{args.repeat}), {cpu:.2f} s CPU (mean); load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")

        start = time.perf_counter()
        run, qrels = read_run(run_path), read_qrels(qrels_path)
        read_s = time.perf_counter() - start
        best_eval = min(_timed(lambda: evaluate(qrels, run)) for _ in range(args.repeat))
        result = evaluate(qrels, run)
        print(f"in process: read run+qrels {read_s:.2f} s, evaluate {best_eval:.2f} s")
        print(f"ndcg_cut_10 = {result.aggregate['ndcg_cut_10']:.4f} (dl19 queries cycled; dl19 itself: 0.5058)")
        verdict = "OK" if best_cli < 2.0 else "SLOW"
        print(f"target < 2 s end to end: {verdict}")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(work) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
