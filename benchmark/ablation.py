"""The reasoning ablation of ``rearank benchmark --ablation reasoning``: one suite, one backend, the method run with
reasoning off, on, and on under each think budget of ``--think-budgets`` (``-O max_think_tokens=N``), each into its
own result folder (``<output-dir>/off``, ``on``, ``on-think-N``; resumable as any suite), then one table and a plot.

The table (``reasoning_ablation.md``, also printed): nDCG@10 x 100 per dataset and their mean, generated tokens per
query, seconds per query, and the difference from reasoning off with its paired significance over every (dataset,
query) pair (:mod:`rearank.measures.significance`: paired t-test and sign-flip randomization). The plot
(``reasoning_ablation.png``): mean nDCG@10 against generated tokens per query, one point per variant.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmark.plots import _pyplot, save_figure
from benchmark.results import SuiteResult
from benchmark.suites import LABELS
from benchmark.tables import MISSING, fmt, markdown_table
from rearank.errors import MissingDataError, RearankError
from rearank.flags import apply_defaults
from rearank.io.files import atomic_write
from rearank.measures.significance import paired_t_p, randomization_p

ABLATIONS = ("reasoning",)
REPORT = "reasoning_ablation"


@dataclass(frozen=True)
class Variant:
    """One run of the ablation: its folder name, the switch and the think budget (None: unbounded)."""

    name: str
    reasoning: bool
    think_budget: int | None = None


def variants(think_budgets: Sequence[int] = ()) -> list[Variant]:
    """Reasoning off, on, and on under each budget (ascending)."""
    return [Variant("off", False), Variant("on", True),
            *(Variant(f"on-think-{b}", True, b) for b in sorted(set(think_budgets)))]


def parse_budgets(text: str | None) -> list[int]:
    """``--think-budgets 256,1024`` -> ``[256, 1024]`` (positive integers)."""
    if not text:
        return []
    try:
        budgets = [int(part) for part in text.split(",")]
    except ValueError:
        budgets = []
    if not budgets or min(budgets) < 1:
        raise RearankError(f"--think-budgets {text!r}: give positive token counts separated by commas, e.g. 256,1024")
    return budgets


def _per_query(suite: SuiteResult) -> dict[tuple[str, str], float]:
    return {(d, q): v for d, result in suite.datasets.items() for q, v in result.per_query().items()}


def _cost(suite: SuiteResult) -> tuple[float, float]:
    """Generated tokens and seconds per query over the suite's datasets."""
    stats = [r.stats for r in suite.datasets.values() if r.stats.get("queries")]
    queries = sum(s["queries"] for s in stats)
    if not queries:
        return float("nan"), float("nan")
    return (sum(s["completion_tokens"] for s in stats) / queries, sum(s["wall_time_s"] for s in stats) / queries)


@dataclass(frozen=True)
class Line:
    """One variant's row: scores per dataset, mean, cost, and the comparison with reasoning off."""

    variant: Variant
    scores: dict[str, float]
    mean: float
    tokens: float
    seconds: float
    delta: float | None
    p_t: float | None
    p_rand: float | None


def lines(suites: dict[str, SuiteResult], order: Sequence[Variant]) -> list[Line]:
    """The table's rows; the comparison is over the (dataset, query) pairs both runs scored."""
    base = _per_query(suites["off"])
    out = []
    for variant in order:
        suite = suites[variant.name]
        scores = {d: 100 * r.score() for d, r in suite.datasets.items()}
        mine = _per_query(suite)
        pairs = sorted(set(base) & set(mine))
        delta = p_t = p_rand = None
        if variant.name != "off" and pairs:
            a, b = np.array([base[k] for k in pairs]), np.array([mine[k] for k in pairs])
            delta, p_t, p_rand = 100 * float((b - a).mean()), paired_t_p(a, b), randomization_p(a, b)
        tokens, seconds = _cost(suite)
        mean = float(np.mean(list(scores.values()))) if scores else float("nan")
        out.append(Line(variant, scores, mean, tokens, seconds, delta, p_t, p_rand))
    return out


def report(rows: Sequence[Line], datasets: Sequence[str], label: str, plot: str | None) -> str:
    """The markdown report of the ablation."""
    header = ["Reasoning", "Think budget", *(LABELS.get(d, d) for d in datasets), "Mean", "Tokens/query", "s/query",
              "Delta vs off", "p (t)", "p (rand.)"]
    body = [[r.variant.name.split("-")[0], str(r.variant.think_budget or MISSING),
             *(fmt(r.scores.get(d)) for d in datasets), fmt(r.mean), fmt(r.tokens, 1), fmt(r.seconds, 3),
             MISSING if r.delta is None else f"{r.delta:+.2f}", fmt(r.p_t, 3), fmt(r.p_rand, 3)] for r in rows]
    return "\n".join([
        f"# Reasoning on and off ({label})", "",
        ("nDCG@10 x 100 per dataset; tokens = generated tokens (reasoning and answer) per query; s/query = wall time "
        "per query; Delta = mean per-query nDCG@10 difference from reasoning off (x 100), with its paired t-test and "
        "sign-flip randomization p-values over every (dataset, query) pair."), "",
        markdown_table(header, body, left=2), "",
        *([f"![quality against reasoning tokens]({plot})", ""] if plot else []),
    ])


def plot(rows: Sequence[Line], title: str, path: Path) -> Path:
    """Mean nDCG@10 against generated tokens per query, one labelled point per variant."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 4))
    xs, ys = [r.tokens for r in rows], [r.mean for r in rows]
    ax.plot(xs, ys, "o")
    for r in rows:
        ax.annotate(r.variant.name, (r.tokens, r.mean), textcoords="offset points", xytext=(5, 5), fontsize=8)
    ax.set_xlabel("generated tokens per query (reasoning + answer)")
    ax.set_ylabel("mean nDCG@10 x 100")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    return save_figure(fig, path)


def run_ablation(args: argparse.Namespace, run_suite: Callable[[argparse.Namespace], SuiteResult],
                 label: Callable[[argparse.Namespace], str]) -> tuple[str, list[Path]]:
    """Run every variant of the suite with ``run_suite`` (:func:`benchmark.run.run_suite`: same backend and settings) and
    write the table and the plot; ``label`` names the system (:func:`benchmark.run` passes its own)."""
    if args.ablation not in ABLATIONS:
        raise RearankError(f"--ablation {args.ablation!r}: choose one of {', '.join(ABLATIONS)}")
    if getattr(args, "reasoning", None) is not None:
        raise RearankError("--ablation reasoning runs both settings: drop --reasoning")
    apply_defaults(args)
    base = label(args)
    order = variants(parse_budgets(args.think_budgets))
    suites = {}
    for variant in order:
        options = list(args.backend_option)
        if variant.think_budget is not None:
            options.append(f"max_think_tokens={variant.think_budget}")
        sub = argparse.Namespace(**{**vars(args), "reasoning": variant.reasoning, "out": args.out / variant.name,
                                    "label": f"{base} {variant.name}", "backend_option": options})
        suites[variant.name] = run_suite(sub)
    datasets = [d for d in suites["off"].datasets if all(d in s.datasets for s in suites.values())]
    if not datasets:
        raise MissingDataError(f"no dataset of {args.suite!r} finished in every variant; see {args.out}/*/report.md")
    rows = lines(suites, order)
    picture = plot(rows, f"{base}: {', '.join(datasets)}", args.out / f"{REPORT}.png")
    text = report(rows, datasets, base, picture.name)
    with atomic_write(args.out / f"{REPORT}.md") as handle:
        handle.write(text)
    return text, [args.out / f"{REPORT}.md", picture]


def add_ablation_arguments(parser: argparse.ArgumentParser) -> None:
    """``--ablation reasoning`` and ``--think-budgets`` of ``rearank benchmark``."""
    group = parser.add_argument_group("ablation")
    group.add_argument("--ablation", choices=ABLATIONS,
                       help="reasoning: run the suite with --reasoning off, on, and on under each --think-budgets "
                       "budget, on the same backend, into <output-dir>/<variant>, then print one table (nDCG@10 per "
                       "dataset, tokens and seconds per query, paired significance against off) and plot quality "
                       "against tokens (reasoning_ablation.md, .png)")
    group.add_argument("--think-budgets", metavar="N[,N...]",
                       help="with --ablation reasoning: also run reasoning on with its thinking closed after N tokens "
                       "(-O max_think_tokens=N; hf, vllm-async and rearank's vLLM server backends)")
