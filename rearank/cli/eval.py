"""``rearank eval``: score a TREC run against qrels with trec_eval semantics, and show what made the run (the
provenance its stats file records, when there is one beside it)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rearank.errors import RearankError
from rearank.io.outputs import reads
from rearank.run.provenance import describe

if TYPE_CHECKING:
    from rearank.measures.ir import Evaluation

DESCRIPTION = """\
Evaluate a TREC run (qid Q0 docid rank score tag) against relevance judgments, with trec_eval semantics:
documents are ranked by score (ties by docid, descending) and every judged query counts, those absent from
the run scoring 0 (trec_eval -c). Queries of the run that have no judgments are ignored. When the run has its stats
file beside it (<run>.stats.json, as `rearank rerank` writes; stats.json in a benchmark dataset folder), what made the
run is shown too: package versions, device, the model's and the template's digests, the decoding settings.

Measures take trec_eval names (ndcg_cut.10, recall.100, map_cut.100, map, recip_rank, P.10, bpref) or
ir-measures names (nDCG@10, R@100, AP@100, RR@10, P@10, R(rel=2)@1000). Results are keyed by trec_eval
output names (ndcg_cut_10, recall_100, map_cut_100, ...).
"""

EPILOG = """\
examples:
  rearank eval --dataset dl19 --run runs/dl19.rearank.trec
  rearank eval --qrels qrels.txt --run run.trec --metric ndcg_cut.10 --metric recall.100 --format json
  rearank eval --qrels beir/scifact/qrels/test.tsv --run run.trec --metric nDCG@10,RR@10 --per-query

--format json prints one object: {"ndcg_cut_10": 0.5058, ..., "per_query": {"<qid>": {"ndcg_cut_10": ...}}}
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``eval`` subcommand."""
    parser = subparsers.add_parser(
        "eval",
        help="evaluate a TREC run against qrels (nDCG@10, Recall@100, MAP@100, ...; trec_eval semantics)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    reads(source.add_argument("--qrels", metavar="FILE", help="TREC qrels (qid iter docid rel) or BEIR qrels .tsv"))
    source.add_argument("--dataset", metavar="NAME", help="take the qrels of a data pack (see `rearank data list`)")
    reads(parser.add_argument("--run", required=True, metavar="FILE", help="TREC run to evaluate (.gz accepted)"))
    parser.add_argument(
        "--metric", "-m", action="append", metavar="NAME",
        help="measure to compute; repeat or comma-separate (default: ndcg_cut.1,5,10 recall.100 map_cut.100)",
    )
    parser.add_argument("--format", choices=("table", "json"), default="table", help="output format (default table)")
    parser.add_argument("--per-query", action="store_true", help="table format: also print every query's values")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Evaluate and print the results."""
    from rearank.data.packs import load_qrels
    from rearank.io.trec import read_run
    from rearank.measures.ir import DEFAULT_MEASURES, evaluate, parse_measures

    measures = parse_measures(args.metric) if args.metric else DEFAULT_MEASURES
    qrels = load_qrels(args.dataset if args.dataset else args.qrels)
    run_ = read_run(args.run)
    if not run_:
        raise RearankError(f"{args.run}: the run is empty")
    result = evaluate(qrels, run_, measures)
    made = recorded_provenance(Path(args.run))
    if args.format == "json":
        json.dump({**result.aggregate, "per_query": result.per_query, **({"provenance": made} if made else {})},
                  sys.stdout, indent=1)
        print()
        return 0
    print(format_table(result, args.run, args.per_query))
    if made:
        print("made with:\n" + "\n".join(describe(made)))
    return 0


def recorded_provenance(run: Path) -> dict[str, Any] | None:
    """What made ``run``, as its stats file records it (``<run>.stats.json``, or ``stats.json`` beside a benchmark
    folder's ``run.trec``); None when there is none or it records none."""
    from rearank.run.job import output_paths

    for stats in (output_paths(run)[1], run.with_name("stats.json")):
        try:
            made = json.loads(stats.read_text(encoding="utf-8")).get("provenance")
        except (OSError, ValueError, AttributeError, RecursionError):
            continue
        if isinstance(made, dict):
            return made
    return None


def format_table(result: Evaluation, run_path: str, per_query: bool = False) -> str:
    """Render an Evaluation as an aligned text table (one measure per row, or per query and measure)."""
    names = list(result.aggregate)
    judged = len(result.per_query)
    lines = [f"run: {run_path}", f"queries: {judged} judged, {judged - len(result.missing)} of them in the run"]
    if result.missing:
        shown = ", ".join(result.missing[:5]) + (" ..." if len(result.missing) > 5 else "")
        lines.append(f"note: {len(result.missing)} judged queries are absent from the run and score 0 ({shown})")
    if result.unjudged:
        lines.append(f"note: {result.unjudged} run queries have no judgments and are ignored")
    if per_query:
        qwidth = max(len("qid"), *(len(q) for q in result.per_query))
        widths = [max(len(name), 6) for name in names]
        lines.append("  ".join([f"{'qid':<{qwidth}}", *(f"{n:>{w}}" for n, w in zip(names, widths))]))
        rows = [*result.per_query.items(), ("all", result.aggregate)]
        for qid, values in rows:
            lines.append("  ".join([f"{qid:<{qwidth}}", *(f"{values[n]:>{w}.4f}" for n, w in zip(names, widths))]))
        return "\n".join(lines)
    width = max(len("measure"), *(len(name) for name in names))
    lines.append(f"{'measure':<{width}}  value")
    lines.extend(f"{name:<{width}}  {result.aggregate[name]:.4f}" for name in names)
    return "\n".join(lines)
