"""``rearank rerank``: rerank a first-stage run with a listwise reasoning LLM (or another method with ``--method``).

Finished queries are appended to the run and traces files as they complete, so an interrupted run is a
valid partial run; ``--resume`` continues it (and retries the queries with a failed model call); an existing run
is replaced only with ``--overwrite``. Every flag is checked before a file is written. With qrels, nDCG@10 is
printed before and after. A run in which the model calls failed (all of them, or ``--fail-share`` of them) exits
with an error naming the first cause.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rearank.engine import Engine
from rearank.errors import RearankError
from rearank.flags import (
    add_engine_argument,
    add_method_arguments,
    add_model_arguments,
    add_run_outcome_arguments,
    run_config,
    run_tag,
)
from rearank.io.outputs import reads, writes
from rearank.run import job
from rearank.run.config import RunConfig, resume_settings
from rearank.run.job import ALL_CANDIDATES
from rearank.run.provenance import run_provenance
from rearank.run.stats import plural
from rearank.types import Request


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Show a default only when there is one and the help text does not already say it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default in (None, False, [], argparse.SUPPRESS) or "default" in text:
            return text
        return super()._get_help_string(action) or text


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``rerank`` subcommand."""
    p = subparsers.add_parser(
        "rerank",
        help="rerank a run with an LLM reranker (listwise, groupwise or pointwise)",
        description="Rerank a first-stage run with an LLM reranker: listwise sliding windows (Rearank / RankGPT) "
        "by default, groupwise scores (GroupRank) or pointwise scores with --method, batching the windows of many "
        "queries per backend call. Writes a TREC run, per-window traces "
        "(JSONL) and run statistics (<output>.stats.json).",
        formatter_class=_HelpFormatter,
    )
    src = p.add_argument_group("input (one of --dataset, --run, --requests)")
    source = src.add_mutually_exclusive_group(required=True)
    source.add_argument("--dataset", help="registered dataset pack, e.g. dl19, dl21, beir-scifact")
    reads(source.add_argument("--run", type=Path, help="TREC run to rerank (needs --topics and --docs)"))
    reads(source.add_argument("--requests", type=Path, help="RankLLM request JSONL (query + candidates with text)"))
    reads(src.add_argument("--topics", type=Path, help="topics: 'qid TAB text' TSV or BEIR queries.jsonl"))
    reads(src.add_argument("--docs", type=Path, help="docs: 'docid TAB text' TSV or BEIR corpus.jsonl"))
    reads(src.add_argument("--qrels", type=Path, help="qrels (TREC or BEIR .tsv) to print nDCG@10 before and after; "
                           "default: the dataset's qrels"))
    src.add_argument("--max-queries", type=int, help="rerank only the first N queries")
    src.add_argument("--skip-missing", action="store_true", help="drop candidates without text instead of failing")

    add_model_arguments(p)
    add_method_arguments(p)
    add_engine_argument(p)

    out = p.add_argument_group("output")
    writes(out.add_argument("--output", "-o", type=Path, required=True, help="TREC run to write"))
    writes(out.add_argument("--traces", type=Path, help="per-window traces JSONL (default: <output>.traces.jsonl)"))
    out.add_argument("--tag", type=run_tag, default="rearank", help="run tag (last column; one word)")
    again = out.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true", help="keep the queries already complete in --output and "
                       "rerank the rest (and those with a failed model call)")
    again.add_argument("--overwrite", action="store_true", help="replace a run already in --output (without it, "
                       "or --resume, an existing run is refused)")
    add_run_outcome_arguments(out)
    out.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``rearank rerank``; returns the exit code."""
    from rearank.data import packs

    _check_args(args)
    config = run_config(args)  # bad settings or templates fail before any data or model is loaded
    if args.engine == "local":  # (Ray hands -O options to its engine replicas too)
        config.check_backend()
    if args.requests is not None:
        requests = packs.read_request_file(args.requests, max_queries=args.max_queries)
    else:
        requests = packs.load_requests(
            dataset=args.dataset, run=args.run, topics=args.topics, docs=args.docs,
            top_k=ALL_CANDIDATES, skip_missing=args.skip_missing, max_queries=args.max_queries,
        )
    if not requests:
        raise RearankError(f"{args.run or args.requests or args.dataset}: no query to rerank (the input is empty)")
    job.check_unique_qids(requests)
    qrels = _load_qrels(args, packs)
    config.backend_kwargs(qrels)  # the oracle without qrels fails now, before any output is written

    counts = {r.query.qid: config.ranking_method.task_count(len(r.candidates)) for r in requests}
    windows = {qid: n for qid, n in counts.items() if n is not None}  # tdpart's depend on the answers
    record = _record(args, config)

    def make_reranker() -> Engine:
        if args.engine == "ray":
            return _ray_engine(config, qrels, args.output, record, resume=args.resume, progress=not args.no_progress)
        return config.engine(config.make_backend(qrels))

    stats, extra = job.rerank_to_files(requests, make_reranker, output=args.output, traces=args.traces,
                                       resume=args.resume, overwrite=args.overwrite, tag=args.tag,
                                       progress=not args.no_progress,
                                       config=record, windows=windows, inputs=_inputs(args, packs),
                                       extra={"provenance": run_provenance(config)})
    traces, stats_path = job.output_paths(args.output, args.traces)
    print(f"reranked {stats.summary()}")
    if qrels is not None:
        extra["ndcg_cut_10"] = _report_ndcg(requests, qrels, args.output)
    stats.write(stats_path, extra=extra)
    print(f"run: {args.output}\ntraces: {traces}\nstats: {stats_path}")
    failure = stats.failure(args.fail_share)
    if failure:
        raise RearankError(failure)
    return 0


def _check_args(args: argparse.Namespace) -> None:
    if args.requests is not None and (args.topics or args.docs):
        raise RearankError("--requests files hold query and passage texts; --topics/--docs apply to --run only")
    if args.run is not None and not (args.topics and args.docs):
        raise RearankError("--run needs --topics and --docs (or use --dataset, or --requests with texts)")
    if args.output.is_dir():
        raise RearankError(f"--output {args.output} is a folder; give a file name")


def _inputs(args: argparse.Namespace, packs: Any) -> dict[str, Path | str | None]:
    """The input files no output may be: the flags' (for the outputs they imply, the default traces and stats
    files) and a --dataset pack's files."""
    pack = packs.resolve(args.dataset) if args.dataset else None
    files = {f"the {args.dataset} pack's {name}": getattr(pack, name) for name in ("run", "topics", "docs", "qrels")
             if pack is not None}
    return {"--run": args.run, "--requests": args.requests, "--topics": args.topics, "--docs": args.docs,
            "--qrels": args.qrels, "--template": args.template, **files}


def _load_qrels(args: argparse.Namespace, packs: Any) -> dict[str, dict[str, int]] | None:
    if args.qrels is not None:
        return packs.load_qrels(args.qrels)
    if args.dataset is not None:
        pack = packs.resolve(args.dataset)
        return packs.load_qrels(pack.qrels) if pack.qrels.is_file() else None
    return None


def _ray_engine(config: RunConfig, qrels: dict[str, dict[str, int]] | None, output: Path, record: dict[str, Any],
                resume: bool, progress: bool) -> Engine:
    """The one loop on a Ray cluster: each round of windows one Ray Dataset, journaled beside ``output``."""
    from rearank.backends.ray import ROUND, RayBackend
    from rearank.engine.journal import Journal

    ray = RayBackend(config.backend, config.model, config.backend_kwargs(qrels), config.sampling,
                     batch_size=config.batch_size, progress=progress)
    journal = Journal(output.with_name(output.name + ".rounds.jsonl"), resume_settings(record), resume=resume)
    return Engine(ray, config.ranking_method, config.sampling, batch_size=ROUND, journal=journal)


def _record(args: argparse.Namespace, config: RunConfig) -> dict[str, Any]:
    """The run's settings as the stats record them: every flag, with the generation budget it ran with."""
    skip = {"func", "command", "backend_option"}
    record = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k not in skip}
    record["max_new_tokens"] = config.sampling.max_new_tokens
    record["backend_options"] = dict(config.backend_options)  # parsed from -O, so a resume with others is refused
    return record


def _report_ndcg(requests: list[Request], qrels: dict[str, dict[str, int]], output: Path) -> dict[str, float]:
    """Print and return nDCG@10 of the first-stage order and of the reranked run, on the judged input queries."""
    scores = job.ndcg_before_after(requests, qrels, output)
    if not scores:
        print("nDCG@10: no input query has judgments in the qrels", file=sys.stderr)
        return {}
    b, a = scores["before"], scores["after"]
    judged = plural(scores["queries"], "judged query", "judged queries")
    print(f"nDCG@10 on {judged}: before {b:.4f} -> after {a:.4f} ({a - b:+.4f})")
    return scores
