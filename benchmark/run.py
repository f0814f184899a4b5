"""Run a reranker over a benchmark suite and write everything a paper table needs.

``python -m benchmark.run --suite trec-dl|beir|bright|all|NAME,NAME --model M --backend B --template rearank|rankgpt
--output-dir results/NAME/`` (the same parser as ``rearank benchmark``). Per dataset it writes the reranked run, the
window traces, metrics JSON (reranked and BM25, aggregate and per query) and efficiency stats; then the
suite report (markdown tables beside the paper's rows) and a bar chart. A dataset whose pack is missing is
skipped with a line in the report. ``--resume`` keeps finished datasets and continues a partial one per query (a
dataset with failed model calls is not finished: its failed queries are retried). A suite that ran no dataset, or
one in which a dataset's model calls failed (all of them, or ``--fail-share`` of them), exits with an error.
``--expect published`` then checks the suite against the published nDCG@10 figures of its checkpoint (exit status 1
when one is outside the band; docs/reproducibility.md); ``--report-only`` runs nothing and reports on (and checks)
the finished suite in ``--output-dir``.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from benchmark.ablation import add_ablation_arguments, run_ablation
from benchmark.expect import DEFAULT_TOLERANCE, check, expected, outside, report
from benchmark.report import write_report
from benchmark.results import (
    METRICS_FILE,
    PLOT_FILE,
    REPORT_FILE,
    RUN_FILE,
    STATS_FILE,
    SUITE_FILE,
    TRACES_FILE,
    SuiteResult,
    load_suite,
    read_json,
    write_json,
)
from benchmark.suites import SUITES, expand
from rearank.backends.base import Backend
from rearank.backends.registry import declared
from rearank.data import packs
from rearank.errors import MissingDataError, RearankError
from rearank.flags import add_method_arguments, add_model_arguments, add_run_outcome_arguments, run_config
from rearank.io.outputs import check_flags, exclusive, reads, writes
from rearank.io.trec import read_run
from rearank.measures.ir import evaluate
from rearank.methods.card import Checkpoint
from rearank.run import job
from rearank.run.config import RunConfig, resume_settings
from rearank.run.provenance import run_provenance
from rearank.run.stats import plural


def add_arguments(parser: argparse.ArgumentParser, checks: bool = False) -> None:
    """The suite runner's options (shared by ``python -m benchmark.run``, ``rearank benchmark`` and the analyses); the
    model, sampling and method flags are ``rearank rerank``'s (:mod:`rearank.flags`). ``checks``: also the
    reproduction check's (``--expect``) and ``--report-only``, with which ``--suite`` is not needed."""
    parser.add_argument("--suite", required=not checks,
                        help=f"{', '.join(SUITES)}, or a comma-separated list of suites and datasets (e.g. dl19,dl21)"
                        + ("; required unless --report-only" if checks else ""))
    writes(parser.add_argument("--output-dir", dest="out", type=Path, required=True,
                               help="result folder (one sub-folder per dataset)"))
    parser.add_argument("--label", help="name of this system in the tables (default: the model, else the backend)")
    parser.add_argument("--max-queries", type=int, help="evaluate only the first N judged queries of each dataset")
    reads(parser.add_argument("--first-stage", metavar="RUN",
                              help="TREC run to rerank instead of each pack's BM25 run; {dataset} in the path is "
                              "replaced by the dataset name (e.g. runs/diver-4b/{dataset}.trec, GroupRank's BRIGHT "
                              "setting); the tables' first-stage column is then this run"))
    parser.add_argument("--resume", action="store_true", help="keep finished datasets and queries in --output-dir")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_run_outcome_arguments(parser)
    add_model_arguments(parser)
    add_method_arguments(parser)
    add_ablation_arguments(parser)
    if checks:
        _add_check_arguments(parser)


def _add_check_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("reproduction check (docs/reproducibility.md)")
    reads(group.add_argument(
        "--expect", metavar="published|FILE",
        help="after the suite, compare each dataset's nDCG@10 with the published figures of its checkpoint (the "
        "method cards', or a JSON FILE's): a table of measured, published, delta and verdict; exit status 1 when "
        "one is outside the band"))
    group.add_argument("--expect-model", metavar="NAME",
                       help="the checkpoint to compare with (name or hub id, e.g. Rearank-7B); default: the suite's "
                       "recorded --model")
    group.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE, metavar="POINTS",
                       help="how far from a published figure (nDCG@10 x 100 points) is still within (default: "
                       "%(default)s)")
    group.add_argument("--report-only", action="store_true",
                       help="run nothing: rebuild the report of the finished suite in --output-dir (and check it "
                       "with --expect)")


def settings_of(args: argparse.Namespace, run: RunConfig) -> dict[str, Any]:
    """The suite's settings as recorded in ``suite.json``: what it runs, its label, how many queries of which first
    stage, the run configuration (:meth:`RunConfig.record`: the method's settings under their flag names) and what
    makes it (:func:`rearank.run.provenance.run_provenance`)."""
    return {"suite": args.suite, "datasets": expand(args.suite), "label": _label(args), **run.record(),
            "top_k": args.top_k, "max_queries": args.max_queries, "first_stage": getattr(args, "first_stage", None),
            "provenance": run_provenance(run)}


def _label(args: argparse.Namespace) -> str:
    """The system's name in tables: ``--label``, else the model, else ``embedded`` (the default of a backend that
    runs a local model: ``LOCAL_MODEL``) or the backend."""
    if args.label or args.model:
        return str(args.label or args.model)
    return "embedded" if declared(args.backend, "LOCAL_MODEL") else args.backend


def _prepare(out: Path, config: dict[str, Any], resume: bool) -> None:
    """Check ``out`` against ``--resume`` and the settings of a previous run in it."""
    unknown = [d for d in config["datasets"] if d not in packs.REGISTRY]
    if unknown:
        raise RearankError(f"unknown dataset(s) {', '.join(unknown)}; suites: {', '.join(SUITES)}; "
                           f"datasets: {', '.join(packs.REGISTRY)}")
    if out.exists() and not out.is_dir():
        raise RearankError(f"--output-dir {out} is a file; give a folder")
    previous = out / SUITE_FILE
    if not previous.is_file():
        return
    if not resume:
        raise RearankError(f"{out} already holds suite results; pass --resume to continue them or choose another --output-dir")
    old = read_json(previous)
    ours, theirs = resume_settings(config, suite=True), resume_settings(old, suite=True, source=f"--resume: {previous}")
    changed = [f"{k}: {theirs.get(k)!r} -> {ours.get(k)!r}" for k in {**theirs, **ours} if theirs.get(k) != ours.get(k)]
    if changed:
        raise RearankError(f"cannot resume {out} with other settings ({'; '.join(changed)}); use another --output-dir")


class SuiteRunner:
    """Runs one dataset after another into a result folder, building the LLM backend once, on first need."""

    def __init__(self, run: RunConfig, config: dict[str, Any], out: Path, resume: bool = False,
                 progress: bool = True, fail_share: float = 1.0) -> None:
        self.run, self.config, self.out = run, config, out
        self.resume, self.progress, self.fail_share = resume, progress, fail_share
        self.method = run.ranking_method
        self._backend: Backend | None = None

    def backend(self, qrels: dict[str, dict[str, int]]) -> Backend:
        """The backend for a dataset: the oracle judges with this dataset's qrels; others are built once."""
        if self.run.declared("NEEDS_QRELS"):
            return self.run.make_backend(qrels)
        if self._backend is None:
            self._backend = self.run.make_backend()
        return self._backend

    def run_dataset(self, name: str) -> str:
        """Rerank and evaluate one dataset; return the line to print (MissingDataError if its pack is absent).

        The rerank is a job (:func:`rearank.run.job.rerank_to_files`), resumable per query like ``rearank rerank``."""
        config, folder = self.config, self.out / name
        pack = packs.resolve(name)
        qrels = packs.load_qrels(name)
        first_stage = Path(config["first_stage"].format(dataset=name)) if config.get("first_stage") else pack.run
        if not first_stage.is_file():
            raise MissingDataError(f"dataset {name!r}: --first-stage run {first_stage} not found")
        requests = [r for r in packs.load_requests(dataset=name, run=first_stage, top_k=config["top_k"])
                    if r.query.qid in qrels]
        requests = requests[: config["max_queries"]]
        if not requests:
            raise MissingDataError(f"dataset {name!r}: no query of {pack.run} has judgments in {pack.qrels}")
        judged = {r.query.qid: qrels[r.query.qid] for r in requests} if config["max_queries"] else qrels
        folder.mkdir(parents=True, exist_ok=True)
        windows = {r.query.qid: self.method.task_count(len(r.candidates)) for r in requests}
        stats, _ = job.rerank_to_files(
            requests, lambda: self.run.engine(self.backend(qrels)),
            own_ranker=False, output=folder / RUN_FILE, traces=folder / TRACES_FILE, stats=folder / STATS_FILE,
            resume=self.resume, tag=self.label, progress=self.progress, windows=windows,
            extra={"dataset": name, "provenance": self.config["provenance"]})
        rerank = evaluate(judged, read_run(folder / RUN_FILE))
        bm25 = evaluate(judged, read_run(first_stage))  # "bm25": the first stage reranked (BM25 by default)
        write_json(folder / METRICS_FILE, {
            "dataset": name, "queries": len(requests), "judged_queries": len(judged), "first_stage": str(first_stage),
            "rerank": {"aggregate": rerank.aggregate, "per_query": rerank.per_query},
            "bm25": {"aggregate": bm25.aggregate, "per_query": bm25.per_query},
        })
        failure = stats.failure(self.fail_share)
        if failure:
            self.config["failed"][name] = failure
        first = "BM25" if first_stage == pack.run else first_stage.name
        return (f"{name}: nDCG@10 {first} {bm25.aggregate['ndcg_cut_10']:.4f} -> {rerank.aggregate['ndcg_cut_10']:.4f} "
                f"on {plural(len(judged), 'query', 'queries')}; {stats.summary()}")

    def close(self) -> None:
        """Release the backend built for the suite."""
        if self._backend is not None:
            self._backend.close()

    @property
    def label(self) -> str:
        return str(self.config["label"]).replace(" ", "_")


def run_suite(args: argparse.Namespace) -> SuiteResult:
    """Run the suite of ``args`` into ``args.out`` and write its report; return the loaded results."""
    if not args.suite:
        raise RearankError("--suite is required (or --report-only, to report on a finished suite)")
    run = run_config(args)  # bad settings or templates fail before any data or model is loaded
    run.check_backend()
    config = settings_of(args, run)
    out: Path = args.out
    with exclusive(out):  # one process writes a result folder at a time
        return _run_suite(SuiteRunner(run, config, out, resume=args.resume, progress=not args.no_progress,
                                      fail_share=getattr(args, "fail_share", 1.0)))


def _run_suite(runner: SuiteRunner) -> SuiteResult:
    config, out = runner.config, runner.out
    _prepare(out, config, runner.resume)
    out.mkdir(parents=True, exist_ok=True)
    config["skipped"], config["failed"] = {}, {}
    write_json(out / SUITE_FILE, config)
    try:
        _run_datasets(runner)
    finally:
        runner.close()
    suite = load_suite(out)
    write_report([suite], out / REPORT_FILE, out / PLOT_FILE)
    return suite


def _run_datasets(runner: SuiteRunner) -> None:
    config, out = runner.config, runner.out
    for name in config["datasets"]:
        if runner.resume and (out / name / METRICS_FILE).is_file() and not _failed_calls(out / name / STATS_FILE):
            print(f"{name}: done earlier, kept ({out / name / METRICS_FILE})", file=sys.stderr)
            continue
        try:
            print(runner.run_dataset(name), file=sys.stderr)
        except MissingDataError as err:
            config["skipped"][name] = str(err)
            print(f"{name}: skipped: {err}", file=sys.stderr)
        write_json(out / SUITE_FILE, config)


def _failed_calls(stats: Path) -> int:
    """The failed model calls a dataset's stats record (a dataset with some is rerun on resume)."""
    try:
        return int(read_json(stats).get("failed_calls", 0))
    except (OSError, RearankError, TypeError, ValueError, AttributeError):
        return 0


def check_outcome(suite: SuiteResult) -> None:
    """Raise a one-line error when the suite ran no dataset, or a dataset's model calls failed (``--fail-share``)."""
    failed = dict(suite.config.get("failed", {}))
    if failed:
        name, why = next(iter(failed.items()))
        more = f" (and {len(failed) - 1} more datasets)" if len(failed) > 1 else ""
        raise RearankError(f"{name}: {why}{more}")
    if not suite.datasets:
        reasons = "; ".join(f"{d}: {why}" for d, why in suite.skipped.items()) or "no dataset asked for"
        raise RearankError(f"no dataset ran ({reasons})")


def report_only(out: Path) -> SuiteResult:
    """Rebuild the report of the finished suite in ``out``; return it."""
    load_suite(out)  # not a suite folder: say so before taking its lock
    with exclusive(out):
        suite = load_suite(out)
        write_report([suite], out / REPORT_FILE, out / PLOT_FILE)
    return suite


def _expected(args: argparse.Namespace) -> Checkpoint | None:
    """The checkpoint ``--expect`` compares with, resolved before anything runs (a wrong name fails at once)."""
    expect = getattr(args, "expect", None)
    if not 0 <= getattr(args, "tolerance", 0.0) < math.inf:
        raise RearankError(f"--tolerance must be a number of points >= 0, got {args.tolerance:g}")
    if not expect:
        if getattr(args, "expect_model", None):
            raise RearankError("--expect-model names the checkpoint of --expect; give --expect published|FILE too")
        return None
    if getattr(args, "ablation", None):
        raise RearankError("--expect checks one suite; run the ablation's variants without it")
    model = args.expect_model
    if model is None:
        model = load_suite(args.out).config.get("model") if args.report_only else args.model
    return expected(expect, model)


def run(args: argparse.Namespace) -> int:
    """Run the suite (or, with ``--ablation``, each variant of it: :mod:`benchmark.ablation`; with ``--report-only``,
    nothing) and print where the report is; with ``--expect``, check it against the published figures (exit status
    1 when one is outside its band)."""
    checkpoint = _expected(args)
    if getattr(args, "report_only", False):
        if getattr(args, "ablation", None) or args.resume:
            raise RearankError("--report-only runs nothing: drop --ablation and --resume")
        suite = report_only(args.out)
    elif getattr(args, "ablation", None):
        text, paths = run_ablation(args, run_suite, _label)
        print(text + "\n" + "\n".join(f"wrote {p}" for p in paths))
        return 0
    else:
        suite = run_suite(args)
    print(f"report: {suite.path / REPORT_FILE}\n{len(suite.datasets)} datasets done, {len(suite.skipped)} skipped")
    if checkpoint is not None:
        lines = check(suite, checkpoint, args.tolerance)
        print(report(suite, checkpoint, lines, args.tolerance))
    check_outcome(suite)
    return 1 if checkpoint is not None and outside(lines) else 0


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmark.run``: the same parser and implementation as ``rearank benchmark``."""
    parser = argparse.ArgumentParser(prog="python -m benchmark.run", description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter, allow_abbrev=False)
    add_arguments(parser, checks=True)
    args = parser.parse_args(argv)
    try:
        check_flags(parser._actions, args)
        return run(args)
    except RearankError as err:
        print(f"benchmark.run: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"benchmark.run: interrupted; finished queries are kept, continue with --resume --output-dir {args.out}",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
