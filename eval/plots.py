"""Bar charts (matplotlib, Agg backend) of our nDCG@10 beside the paper's published rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

from eval.report import Row, our_rows, paper_rows  # noqa: E402
from eval.results import SuiteResult  # noqa: E402
from eval.suites import LABELS, TABLES  # noqa: E402


def _panels(suites: Sequence[SuiteResult], figures: dict[str, Any]) -> list[tuple[str, list[str], list[Row]]]:
    """(title, evaluated datasets, rows) for each table holding at least one dataset we evaluated."""
    ours = our_rows(suites)
    evaluated = [d for d in dict.fromkeys(d for s in suites for d in s.datasets)]
    panels = []
    for table in TABLES:
        columns = [d for d in table.columns if d in evaluated]
        if columns:
            panels.append((table.title, columns, ours + paper_rows(figures, table)))
    others = [d for d in evaluated if not any(d in t.columns for t in TABLES)]
    if others:
        panels.append(("Other datasets", others, ours))
    return panels


def save_figure(fig: plt.Figure, path: Path) -> Path:
    """Save a figure write-then-rename and close it."""
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
    fig.savefig(tmp, dpi=120, bbox_inches="tight")
    plt.close(fig)
    tmp.replace(path)
    return path


def plot_comparison(suites: Sequence[SuiteResult], figures: dict[str, Any], path: Path) -> Path | None:
    """Grouped bars of nDCG@10 x 100 per evaluated dataset: our rows solid, the paper's rows hatched.

    Returns the PNG path, or None when no dataset was evaluated (nothing to plot).
    """
    panels = _panels(suites, figures)
    if not panels:
        return None
    widths = [max(4.0, 1.1 * len(columns) * max(1, len(rows)) / 4) for _, columns, rows in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(max(8.0, max(widths)), 4.2 * len(panels)), squeeze=False)
    colors = plt.get_cmap("tab10").colors
    for ax, (title, columns, rows) in zip(axes[:, 0], panels):
        rows = [r for r in rows if any(c in r.values for c in columns)]
        bar = 0.8 / len(rows)
        for i, row in enumerate(rows):
            xs = [j + (i - (len(rows) - 1) / 2) * bar for j, c in enumerate(columns) if c in row.values]
            ys = [row.values[c] for c in columns if c in row.values]
            bars = ax.bar(xs, ys, bar, label=row.label, color=colors[i % len(colors)],
                          hatch="//" if row.paper else None, edgecolor="white" if row.paper else None,
                          alpha=0.75 if row.paper else 1.0)
            if len(columns) * len(rows) <= 40:
                ax.bar_label(bars, fmt="%.1f", fontsize=7, padding=1)
        ax.set_xticks(range(len(columns)), [LABELS.get(c, c) for c in columns])
        ax.set_ylabel("nDCG@10 x 100")
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
        ax.legend(fontsize=8, ncol=2, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return save_figure(fig, path)
