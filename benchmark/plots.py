"""Bar charts (matplotlib, Agg backend) of our nDCG@10 beside the paper's published rows."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmark.results import SuiteResult
from benchmark.suites import LABELS, TABLES
from benchmark.tables import LengthBin, Row, our_rows, paper_rows
from rearank.io.files import atomic_path


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


def _pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend, imported on first plot (it costs a second at start-up, and
    ``rearank benchmark`` loads this module through :mod:`benchmark.report`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path) -> Path:
    """Save a figure write-then-rename and close it."""
    plt = _pyplot()
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=120, bbox_inches="tight")
    finally:
        plt.close(fig)
    return path


def plot_comparison(suites: Sequence[SuiteResult], figures: dict[str, Any], path: Path) -> Path | None:
    """Grouped bars of nDCG@10 x 100 per evaluated dataset: our rows solid, the paper's rows hatched.

    Returns the PNG path, or None when no dataset was evaluated (nothing to plot).
    """
    panels = _panels(suites, figures)
    if not panels:
        return None
    plt = _pyplot()
    widths = [max(4.0, 1.1 * len(columns) * max(1, len(rows)) / 4) for _, columns, rows in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(max(8.0, max(widths)), 4.2 * len(panels)), squeeze=False)
    colors = plt.get_cmap("tab10").colors
    for ax, (title, columns, rows) in zip(axes[:, 0], panels):
        rows = [r for r in rows if any(c in r.values for c in columns)]
        bar = min(0.8 / len(rows), 0.3)
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


def plot_length_bins(bins: Sequence[LengthBin], title: str, path: Path) -> Path:
    """Figure 6 style: mean window nDCG@10 after reranking per completion-token bin, with window counts."""
    plt = _pyplot()
    centres = [(b.low + b.high) / 2 for b in bins]
    width = (bins[0].high - bins[0].low) * 0.9 or 1.0
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    filled = [(c, b) for c, b in zip(centres, bins) if b.mean_after is not None]
    top.bar([c for c, _ in filled], [100 * b.mean_after for _, b in filled], width, color="tab:blue",
            label="window nDCG@10 after reranking")
    top.plot([c for c, _ in filled], [100 * b.mean_gain for _, b in filled], "o-", color="tab:red",
             label="gain over presented order")
    top.axhline(0, color="black", linewidth=0.8)
    top.set_ylabel("nDCG@10 x 100 (within window)")
    top.set_title(f"Reasoning length vs. window nDCG@10 — {title}")
    top.legend(fontsize=8)
    top.grid(axis="y", alpha=0.3)
    bottom.bar(centres, [b.windows for b in bins], width, color="tab:gray")
    bottom.set_ylabel("windows")
    bottom.set_xlabel("completion tokens (equal-width bins)")
    return save_figure(fig, path)


def plot_pass_curves(curves: dict[str, Sequence[float]], title: str, path: Path) -> Path:
    """Figure 7 style: nDCG@10 after 0 (BM25), 1, ..., P passes, one line per dataset."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, curve in curves.items():
        ax.plot(range(len(curve)), [100 * v for v in curve], "o-", label=LABELS.get(name, name))
    longest = max(len(c) for c in curves.values())
    ax.set_xticks(range(longest), ["BM25"] + [str(p) for p in range(1, longest)])
    ax.set_xlabel("reranking passes")
    ax.set_ylabel("nDCG@10 x 100")
    ax.set_title(f"Multiple reranking passes — {title}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, path)
