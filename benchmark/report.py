"""Markdown report of one or more suite result folders, shaped like the paper's Tables 1 and 2.

``python -m benchmark.report OUT [OUT2 ...] [--output report.md] [--plot ndcg10.png]`` rebuilds
the report from result folders (several folders = several model rows).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmark.plots import plot_comparison
from benchmark.results import MEASURES, PLOT_FILE, REPORT_FILE, SuiteResult, load_suite
from benchmark.suites import LABELS, TABLES, Group
from benchmark.tables import MISSING, Row, fmt, load_paper_figures, markdown_table, our_rows, paper_rows
from rearank.errors import RearankError
from rearank.io.files import atomic_write
from rearank.run.provenance import flatten


def comparison_table(rows: Sequence[Row], columns: Sequence[str], groups: Sequence[Group], decimals: int = 2) -> str:
    """Rows x (datasets + group averages) of nDCG@10 x 100."""
    header = ["Model"] + [LABELS.get(c, c) for c in columns] + [g.label for g in groups]
    body = []
    for row in rows:
        digits = decimals if row.paper else 2
        cells = [fmt(row.values.get(c), digits) for c in columns] + [row.averages.get(g.key, MISSING) for g in groups]
        body.append([row.label] + cells)
    return markdown_table(header, body)


def _describe(suite: SuiteResult) -> str:
    c = suite.config
    parts = [
        f"backend `{c.get('backend')}`",
        f"model `{c.get('model') or MISSING}`",
        f"template `{c.get('template')}`",
        f"window {c.get('window')}, step {c.get('step')}, passes {c.get('passes')}, top-{c.get('top_k')}",
        f"max new tokens {c.get('max_new_tokens')}",
    ]
    if c.get("max_queries"):
        parts.append(f"**first {c['max_queries']} queries per dataset only**")
    line = f"- **{suite.label}** (`{suite.path}`): " + ", ".join(parts)
    made = c.get("provenance")
    if isinstance(made, dict):  # what made it (rearank.run.provenance), when the suite records it
        line += "; made with " + ", ".join(f"{k} `{v}`" for k, v in flatten(made).items())
    return line


def efficiency_table(suites: Sequence[SuiteResult]) -> str:
    """Per dataset: quality beside LLM calls, tokens, wall time, throughput and parse statuses."""
    header = ["Model", "Dataset", "Queries", "nDCG@10 BM25", "nDCG@10", "LLM calls", "Prompt tok",
              "Completion tok", "Wall s", "Queries/s", "Parse status"]
    body = []
    for suite in suites:
        for name, result in suite.datasets.items():
            s = result.stats
            statuses = ", ".join(f"{k} {v}" for k, v in s.get("status_counts", {}).items() if v) or MISSING
            body.append([
                suite.label, name, str(s.get("queries", MISSING)),
                fmt(100 * result.score("bm25")), fmt(100 * result.score()),
                str(s.get("calls", MISSING)), str(s.get("prompt_tokens", MISSING)),
                str(s.get("completion_tokens", MISSING)),
                fmt(s.get("wall_time_s")), fmt(s.get("queries_per_s"), 3), statuses,
            ])
    return markdown_table(header, body, left=2)


def measures_table(suites: Sequence[SuiteResult]) -> str:
    """Every measure of every dataset, BM25 and reranked, x 100."""
    header = ["System", "Dataset"] + list(MEASURES.values())
    body = []
    for i, suite in enumerate(suites):
        for name, result in suite.datasets.items():
            systems = (("BM25", "bm25"), (suite.label, "rerank")) if i == 0 else ((suite.label, "rerank"),)
            for label, system in systems:
                agg = result.metrics[system]["aggregate"]
                body.append([label, name] + [fmt(100 * agg[m]) if m in agg else MISSING for m in MEASURES])
    return markdown_table(header, body, left=2)


def build_report(suites: Sequence[SuiteResult], figures: dict[str, Any] | None = None, plot: str | None = None) -> str:
    """The whole markdown report for ``suites`` (one row each), with the paper's rows beside them."""
    if not suites:
        raise RearankError("no result folder to report on")
    figures = figures or load_paper_figures()
    requested = [d for s in suites for d in s.config.get("datasets", [])]
    ours = our_rows(suites)
    intro = ("nDCG@10 x 100 (trec_eval `ndcg_cut.10`, judged queries missing from a run count 0), "
             "reranking the BM25 top-100.")
    out = ["# Benchmark report", "", intro, ""]
    out += [_describe(s) for s in suites]
    if any(s.config.get("max_queries") for s in suites):
        out += ["", "> Query subsets: figures on the first N queries are not comparable to the paper's."]
    shown = [table for table in TABLES if any(d in table.columns for d in requested)]
    for table in shown:
        rows = ours + paper_rows(figures, table)
        out += ["", f"## {table.title}", "", comparison_table(rows, table.columns, table.averages, table.decimals)]
    others = [d for d in dict.fromkeys(requested) if not any(d in t.columns for t in TABLES)]
    if others:
        out += ["", "## Other datasets (not in the paper's tables)", "", comparison_table(ours, others, [])]
    skipped = {d: why for s in suites for d, why in s.skipped.items()}
    if skipped:
        out += ["", "## Skipped datasets", ""] + [f"- skipped `{d}`: {why}" for d, why in skipped.items()]
    if plot:
        out += ["", f"![nDCG@10 comparison]({plot})"]
    if any(s.datasets for s in suites):
        out += ["", "## Efficiency", "", efficiency_table(suites), "", "## All measures (x 100)", "",
                measures_table(suites)]
    out += ["", "## Published figures", "", f"The rows marked (paper) are from: {figures['citation']}.", ""]
    out += [f"- {figures['sources'][table.key]}" for table in shown if table.key in figures.get("sources", {})]
    out += [f"- {note}" for note in figures.get("notes", [])]
    return "\n".join(out) + "\n"


def write_report(suites: Sequence[SuiteResult], output: Path, plot: Path | None = None) -> Path:
    """Write the report (and the bar chart, when ``plot`` is given) next to each other."""
    drawn = plot_comparison(suites, load_paper_figures(), plot) if plot is not None else None
    text = build_report(suites, plot=drawn.name if drawn is not None else None)
    with atomic_write(output) as handle:
        handle.write(text)
    return output


def main(argv: list[str] | None = None) -> int:
    """CLI: rebuild a report from result folders."""
    parser = argparse.ArgumentParser(prog="python -m benchmark.report", description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="suite result folders (one table row each)")
    parser.add_argument("--output", type=Path, help="report path (default: FIRST/report.md)")
    parser.add_argument("--plot", type=Path, help="bar chart path (default: next to the report)")
    args = parser.parse_args(argv)
    try:
        suites = [load_suite(f) for f in args.folders]
        output = args.output or args.folders[0] / REPORT_FILE
        plot = args.plot or output.with_name(PLOT_FILE)
        write_report(suites, output, plot)
    except RearankError as err:
        print(f"benchmark.report: error: {err}", file=sys.stderr)
        return 2
    print(output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
