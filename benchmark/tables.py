"""The rows and table helpers shared by the report, the analyses and the plots (the bottom of :mod:`eval`).

Arrows go one way: ``run -> report -> plots -> tables`` and ``analyses -> run, plots, tables``; this module
imports only :mod:`benchmark.results` and :mod:`benchmark.suites`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from benchmark.results import SuiteResult
from benchmark.suites import GROUPS, Group, TableLayout

MISSING = "—"


@dataclass
class Row:
    """One table row: nDCG@10 x 100 per dataset, and the group averages to print."""

    label: str
    values: dict[str, float]
    averages: dict[str, str] = field(default_factory=dict)
    paper: bool = False
    source: str = ""


def load_paper_figures() -> dict[str, Any]:
    """The published figures shipped with the package (``benchmark/paper_figures.json``)."""
    return json.loads(resources.files("benchmark").joinpath("paper_figures.json").read_text(encoding="utf-8"))


def fmt(value: float | None, decimals: int = 2) -> str:
    """A score as the tables print it (``—`` when absent)."""
    return MISSING if value is None else f"{value:.{decimals}f}"


def group_average(values: dict[str, float], group: Group) -> str:
    """The group mean as printed: plain when every member is there, ``x (k/n)`` when only k are."""
    present = [values[d] for d in group.datasets if d in values]
    if not present:
        return MISSING
    mean = fmt(sum(present) / len(present))
    return mean if len(present) == len(group.datasets) else f"{mean} ({len(present)}/{len(group.datasets)})"


def our_rows(suites: Sequence[SuiteResult]) -> list[Row]:
    """BM25 (from the first folder holding each dataset) and one row per evaluated system."""
    bm25: dict[str, float] = {}
    for suite in suites:
        for name, result in suite.datasets.items():
            bm25.setdefault(name, 100 * result.score("bm25"))
    rows = [Row("BM25 (ours)", bm25)]
    for suite in suites:
        rows.append(Row(f"{suite.label} (ours)", {n: 100 * r.score() for n, r in suite.datasets.items()}))
    for row in rows:
        row.averages = {g.key: group_average(row.values, g) for g in GROUPS.values()}
    return rows


def paper_rows(figures: dict[str, Any], table: TableLayout) -> list[Row]:
    """The published rows of one paper table, averages as printed in the paper."""
    rows = []
    for entry in figures["tables"][table.key]["rows"]:
        values = {k: float(v) for k, v in entry["values"].items() if v is not None}
        averages = {k: fmt(v, table.decimals) for k, v in entry.get("averages", {}).items()}
        rows.append(Row(f"{entry['model']} (paper)", values, averages, paper=True, source=entry.get("source", "")))
    return rows


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> str:
    """A GitHub markdown table, the first ``left`` columns left-aligned and the others right-aligned."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join([" --- "] * left + [" ---: "] * (len(header) - left)) + "|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines)


@dataclass(frozen=True)
class LengthBin:
    """Windows whose completion tokens fall in ``[low, high)`` (the last bin includes ``high``)."""

    low: float
    high: float
    windows: int
    mean_after: float | None
    mean_gain: float | None
