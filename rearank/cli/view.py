"""``rearank view``: one self-contained HTML page of a reranking run, its window traces and benchmark plots."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rearank.errors import MissingDataError, RearankError
from rearank.io.outputs import check_outputs, reads, writes

#: File names inside a ``rearank benchmark`` dataset folder (see benchmark.results; not imported: rearank never imports eval).
BENCHMARK_RUN, BENCHMARK_TRACES, BENCHMARK_STATS = "run.trec", "traces.jsonl", "stats.json"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``view`` subcommand."""
    p = subparsers.add_parser(
        "view",
        help="write a self-contained HTML page of a run: rankings, each window's reasoning, plots",
        description="Write one HTML file (no server, no network) showing, per query, the first-stage order "
        "against the final order (moved passages highlighted, judged relevance with qrels) and every window's "
        "reasoning, parsed permutation and parse status, plus benchmark plots. RUN is a TREC run written by "
        "`rearank rerank` (traces: RUN.traces.jsonl) or a `rearank benchmark` dataset folder (run.trec, "
        "traces.jsonl; plots from it and its parent).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    reads(p.add_argument("run", type=Path, metavar="RUN", help="reranked TREC run, or a benchmark dataset folder"))
    reads(p.add_argument("--traces", type=Path, help="window traces JSONL (default: RUN.traces.jsonl)"))
    p.add_argument("--dataset", help="pack whose topics, docs, qrels and first-stage run to show (e.g. dl19)")
    reads(p.add_argument("--first-stage", type=Path, help="first-stage TREC run (default: the dataset's; else, for a "
                         "listwise run, recovered from the traces)"))
    reads(p.add_argument("--topics", type=Path, help="query texts: 'qid TAB text' TSV or BEIR queries.jsonl"))
    reads(p.add_argument("--docs", type=Path, help="passage texts: 'docid TAB text' TSV or BEIR corpus.jsonl"))
    reads(p.add_argument("--qrels", type=Path, help="judgments (TREC or BEIR .tsv) to show relevance and nDCG@10"))
    reads(p.add_argument("--plots", type=Path, action="append", default=[], metavar="DIR",
                         help="folder of PNG plots to embed (e.g. a `rearank benchmark --output-dir` folder), "
                         "repeatable"))
    p.add_argument("--top", type=int, default=20, help="passages shown per ranking")
    p.add_argument("--max-queries", type=int, help="show only the first N queries of the run")
    writes(p.add_argument("--output", "-o", type=Path, help="HTML file to write (default: RUN.html)"))
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``rearank view``; returns the exit code."""
    from rearank.data import packs
    from rearank.io.trec import read_run
    from rearank.run.files import read_traces
    from rearank.view import ViewInput, undo_windows, write_view

    if args.top < 1 or (args.max_queries is not None and args.max_queries < 1):
        raise RearankError("--top and --max-queries must be at least 1")
    run_path, traces_path, stats_path, plot_dirs = _locate(args)
    output = args.output or run_path.with_name(run_path.name + ".html")
    check_outputs({"RUN": run_path, "--traces": traces_path, "--first-stage": args.first_stage, "--topics": args.topics,
                   "--docs": args.docs, "--qrels": args.qrels}, {"--output": output})  # also the files RUN implies
    run = {qid: [d for d, _ in ranked] for qid, ranked in read_run(run_path).items()}
    if args.max_queries is not None:
        run = dict(list(run.items())[:args.max_queries])
    if not run:
        raise RearankError(f"{run_path}: the run holds no query")
    traces = read_traces(traces_path) if traces_path is not None and traces_path.is_file() else {}
    if args.traces is not None and not args.traces.is_file():
        raise MissingDataError(f"traces file not found: {args.traces}")
    pack = packs.resolve(args.dataset) if args.dataset else None
    first_path = args.first_stage or (pack.run if pack else None)
    first_stage, label = None, "First stage"
    if first_path is not None:
        first_stage = {qid: [d for d, _ in ranked] for qid, ranked in read_run(first_path).items()}
        label = f"First stage ({Path(first_path).name})"
    elif traces and _stats(stats_path).get("config", {}).get("method", "listwise") == "listwise":
        first_stage = {qid: undo_windows(docids, traces.get(qid, ())) for qid, docids in run.items()}
        label = "First stage (recovered from the traces)"
    topics_path, docs_path = args.topics or (pack.topics if pack else None), args.docs or (pack.docs if pack else None)
    qrels_path = args.qrels or (pack.qrels if pack else None)
    topics = packs.load_topics(topics_path) if topics_path else {}
    shown = {d for qid in run for d in run[qid][:args.top]} | {
        d for qid in run for d in (first_stage or {}).get(qid, [])[:args.top]}
    docs = packs.load_docs(docs_path, shown) if docs_path else {}
    _check_matches(run_path, run, (topics_path, topics), (docs_path, docs), shown, args.dataset)
    qrels = packs.load_qrels(qrels_path) if qrels_path else None
    plots = sorted({p.resolve() for folder in plot_dirs for p in Path(folder).glob("*.png")}, key=lambda p: p.name)
    view = ViewInput(run=run, traces=traces, first_stage=first_stage, first_stage_label=label, topics=topics,
                     docs=docs, qrels=qrels, stats=_stats(stats_path), plots=plots,
                     title=f"rearank · {run_path.name if run_path.name != BENCHMARK_RUN else run_path.parent.name}",
                     top=args.top)
    write_view(output, view)
    windows = sum(len(traces.get(qid, ())) for qid in run)
    print(f"view: {output} ({len(run)} queries, {windows} windows, {len(plots)} plots, "
          f"{output.stat().st_size / 1e6:.2f} MB)", file=sys.stderr)
    return 0


def _locate(args: argparse.Namespace) -> tuple[Path, Path | None, Path, list[Path]]:
    """Run, traces, stats and plot folders for RUN (a run file, or a benchmark dataset folder)."""
    for folder in args.plots:
        if not folder.is_dir():
            raise MissingDataError(f"--plots {folder}: not a folder")
    if args.run.is_dir():
        run_path = args.run / BENCHMARK_RUN
        if not run_path.is_file():
            raise MissingDataError(f"{args.run} is a folder without {BENCHMARK_RUN}; pass a run file or a "
                                   "`rearank benchmark` dataset folder")
        return (run_path, args.traces or args.run / BENCHMARK_TRACES, args.run / BENCHMARK_STATS,
                [args.run, args.run.parent, *args.plots])
    if not args.run.is_file():
        raise MissingDataError(f"run file not found: {args.run}")
    default = args.run.with_name(args.run.name + ".traces.jsonl")
    return args.run, args.traces or default, args.run.with_name(args.run.name + ".stats.json"), list(args.plots)


def _check_matches(run_path: Path, run: dict[str, list[str]], topics: tuple[Path | None, dict],
                   docs: tuple[Path | None, dict], shown: set[str], dataset: str | None) -> None:
    """Refuse topics that hold none of the run's queries, or docs none of the passages shown: the run was made
    from another dataset, and the page would show empty queries and no passage."""
    source = f"--dataset {dataset}" if dataset else "the given files"
    (topics_path, texts), (docs_path, passages) = topics, docs
    if topics_path is not None and not texts.keys() & run.keys():
        raise RearankError(f"{run_path}: none of its {len(run)} queries (first: {next(iter(run))!r}) is in "
                           f"{topics_path} ({source}); pass the dataset or --topics the run was made from")
    if docs_path is not None and shown and not passages:
        raise RearankError(f"{run_path}: none of the passages it ranks is in {docs_path} ({source}); pass the "
                           "dataset or --docs the run was made from")


def _stats(path: Path) -> dict[str, Any]:
    """The run's stats JSON, or {} when absent or unreadable (the page just shows less)."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}
