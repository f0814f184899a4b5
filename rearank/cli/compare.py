"""``rearank compare A B``: the drift report of two runs (:mod:`rearank.run.drift`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rearank.errors import RearankError
from rearank.io.outputs import reads
from rearank.run.drift import DatasetRun, RunSide, compare_runs, load_rerank_run, read_stats

DESCRIPTION = """\
Compare two runs and show what moved their scores: per dataset the nDCG@10 of A and B, the delta with a paired
t-test and a paired randomization test, then what differs window by window -- windows sent another prompt
(template, truncation or tokenizer drift), windows sent the same prompt but answered otherwise (model or library
drift), windows that differ because an earlier window of their query changed -- the first few of each shown, and
the settings and environments (package versions, device, model and template digests) side by side.

A and B are each a run of `rearank rerank` (the TREC run file, with its <run>.traces.jsonl and <run>.stats.json
beside it) or a `rearank benchmark` result folder. Windows are matched by dataset, query id and position among the
query's traces.
"""

EPILOG = """\
exit status: 0 when the checks asked for hold, 1 when a dataset's delta is outside --tolerance, a prompt differs
with --same-prompts or any window differs with --same-answers, 2 on an error.

examples:
  rearank compare runs/old.trec runs/new.trec --dataset dl19 --tolerance 0.5
  rearank compare results/vllm-0.8/ results/vllm-0.9/ --same-prompts
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``compare`` subcommand."""
    parser = subparsers.add_parser(
        "compare", help="drift report of two runs: nDCG@10 delta with paired tests, changed windows, environments",
        description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    reads(parser.add_argument("a", type=Path, help="the baseline: a rerank run file or a benchmark result folder"))
    reads(parser.add_argument("b", type=Path, help="the run compared against it: a rerank run file or a benchmark result folder"))
    judged = parser.add_mutually_exclusive_group()
    reads(judged.add_argument("--qrels", type=Path, metavar="FILE",
                              help="judgments for rerank runs (default: the qrels or dataset each run records)"))
    judged.add_argument("--dataset", metavar="NAME", help="take the qrels of a data pack (rerank runs)")
    parser.add_argument("--tolerance", type=float, metavar="POINTS",
                        help="exit 1 when a dataset's nDCG@10 delta is outside +-POINTS (x 100, e.g. 0.5)")
    parser.add_argument("--same-prompts", action="store_true",
                        help="exit 1 when a window was sent another prompt (template, truncation, tokenizer)")
    parser.add_argument("--same-answers", action="store_true",
                        help="exit 1 when any window differs (a prompt or an answer): a recorded-output check")
    parser.add_argument("--shown", type=int, default=5, metavar="N", help="changed windows shown per kind (default 5)")
    parser.add_argument("--permutations", type=int, default=10000, help="randomization test samples (default 10000)")
    parser.add_argument("--seed", type=int, default=0, help="randomization test seed (default 0)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the drift report; 1 when a check asked for fails."""
    if args.tolerance is not None and args.tolerance < 0:
        raise RearankError(f"--tolerance must be 0 or more points, got {args.tolerance:g}")
    if args.shown < 0:
        raise RearankError(f"--shown must be 0 or more, got {args.shown}")
    drift = compare_runs(load_side(args.a, args), load_side(args.b, args), args.permutations, args.seed)
    print(drift.report(args.shown))
    failures = drift.failures(args.tolerance, args.same_prompts, args.same_answers)
    print("\n" + ("\n".join(f"FAIL: {why}" for why in failures) if failures else "OK: the checks asked for hold"))
    return 1 if failures else 0


def load_side(path: Path, args: argparse.Namespace) -> RunSide:
    """A benchmark result folder (it holds ``suite.json``) or a rerank run file, with its per-query nDCG@10."""
    from benchmark.results import SUITE_FILE, TRACES_FILE, load_suite
    from rearank.run.files import read_traces

    if path.is_dir():
        if not (path / SUITE_FILE).is_file():
            raise RearankError(f"{path} is a folder without {SUITE_FILE}: give a benchmark result folder or a run file")
        suite = load_suite(path)
        datasets = {name: DatasetRun(result.per_query(), read_traces(path / name / TRACES_FILE)
                                     if (path / name / TRACES_FILE).is_file() else {})
                    for name, result in suite.datasets.items()}
        made = suite.config.get("provenance")
        return RunSide(f"{suite.label} ({path})", datasets, dict(suite.config), made if isinstance(made, dict) else {})
    if not path.is_file():
        raise RearankError(f"{path}: no such run file or result folder")
    return load_rerank_run(path, _scores(path, args))


def _scores(run: Path, args: argparse.Namespace) -> dict[str, float]:
    """Per-query nDCG@10 of a rerank run, judged by --qrels / --dataset or what its stats record ({} if none)."""
    from rearank.data.packs import load_qrels
    from rearank.io.trec import read_run
    from rearank.measures.ir import evaluate
    from rearank.run.job import output_paths

    source: Any = args.qrels or args.dataset
    if source is None:
        config = read_stats(output_paths(run)[1]).get("config") or {}
        source = config.get("qrels") or config.get("dataset")
    if not source:
        return {}
    ranked = read_run(run)
    judged = evaluate(load_qrels(source), ranked, ["nDCG@10"])
    return {qid: values["ndcg_cut_10"] for qid, values in judged.per_query.items() if qid in ranked}
