"""The paper's analyses: reasoning on/off (Table 4), reasoning length (Figure 6), several passes (Figure 7).

``python -m benchmark.analyses reasoning --suite S --backend B --model M --output-dir DIR``
    runs the suite with the reasoning prompt (``rearank``) into DIR/reasoning and with the zero-shot prompt
    (``rankgpt``) into DIR/zero-shot, and writes DIR/reasoning.md (nDCG@10 side by side, and Table 4). When the
    model's chat template has a thinking switch (Qwen3's ``enable_thinking``; ``--thinking-switch auto`` reads the
    hf/vllm model's template, ``on`` forces it, e.g. for an openai server), the reasoning run also sets
    ``-O enable_thinking=true`` and the zero-shot run ``-O enable_thinking=false``.
``python -m benchmark.analyses length RESULT_DIR [--dataset D] [--bins 20]``
    bins the windows of a finished suite by completion tokens (equal-width bins) and writes
    RESULT_DIR/reasoning_length.{md,png}: per bin, the windows' mean nDCG@10 after reranking, computed inside
    the window (the window's own passages are the ideal, as in the RL reward) from traces and qrels, and the
    mean gain over the window's presented order. Windows without any relevant passage are left out.
``python -m benchmark.analyses passes --suite S --backend B --model M --output-dir DIR --passes 3``
    runs the suite with P passes and writes DIR/passes.{md,png}: nDCG@10 after 0 (BM25), 1, ..., P passes,
    replayed from the window traces of the single P-pass run.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats

from benchmark import run as suite_run
from benchmark.plots import plot_length_bins, plot_pass_curves
from benchmark.results import MAIN_MEASURE, TRACES_FILE, SuiteResult, load_suite
from benchmark.suites import GROUPS
from benchmark.tables import MISSING, LengthBin, fmt, group_average, load_paper_figures, markdown_table
from rearank.backends.registry import declared
from rearank.errors import MissingDataError, RearankError
from rearank.flags import apply_defaults
from rearank.io.files import atomic_write
from rearank.io.outputs import guard_commands, reads
from rearank.measures.ndcg import ndcg_at_k
from rearank.methods.listwise.answer import apply_permutation
from rearank.run.files import read_traces
from rearank.types import WindowTrace

LENGTH_REPORT = "reasoning_length"
PASSES_REPORT = "passes"
REASONING_REPORT = "reasoning.md"
PROMPTS = {"reasoning": "rearank", "zero-shot": "rankgpt"}


def replay(initial: Sequence[str], traces: Iterable[WindowTrace], passes: int | None = None) -> list[str]:
    """The order the driver produced: apply each window's permutation, in trace order, to ``initial``.

    ``passes`` keeps only the windows of the first ``passes`` passes (None: all).
    """
    order = list(initial)
    for trace in traces:
        if passes is None or trace.pass_index < passes:
            order[trace.start:trace.end] = apply_permutation(order[trace.start:trace.end], trace.permutation)
    return order


@dataclass(frozen=True)
class WindowScore:
    """One window: its completion tokens and its nDCG@10 (inside the window) before and after reranking."""

    qid: str
    pass_index: int
    completion_tokens: int
    before: float
    after: float


def window_scores(initial: Sequence[str], traces: Iterable[WindowTrace], judged: Mapping[str, int]) -> list[WindowScore]:
    """Score every window of one query; windows whose passages are all non-relevant are left out."""
    order, scores = list(initial), []
    for trace in traces:
        presented = order[trace.start:trace.end]
        reranked = apply_permutation(presented, trace.permutation)
        order[trace.start:trace.end] = reranked
        labels = [judged.get(d, 0) for d in presented]
        if max(labels, default=0) > 0:
            scores.append(WindowScore(trace.qid, trace.pass_index, trace.completion_tokens, ndcg_at_k(labels),
                                      ndcg_at_k([judged.get(d, 0) for d in reranked])))
    return scores


def length_bins(scores: Sequence[WindowScore], bins: int = 20) -> list[LengthBin]:
    """Equal-width bins over the completion-token range (as in the paper's Figure 6)."""
    if not scores:
        raise RearankError("no window with a relevant passage to bin")
    tokens = np.array([s.completion_tokens for s in scores], dtype=float)
    edges = np.histogram_bin_edges(tokens, bins=bins)
    index = np.clip(np.digitize(tokens, edges[1:-1], right=False), 0, len(edges) - 2)
    out = []
    for b in range(len(edges) - 1):
        members = [s for s, i in zip(scores, index) if i == b]
        out.append(LengthBin(
            float(edges[b]), float(edges[b + 1]), len(members),
            float(np.mean([s.after for s in members])) if members else None,
            float(np.mean([s.after - s.before for s in members])) if members else None,
        ))
    return out


def _initial_orders(suite: SuiteResult, dataset: str) -> dict[str, list[str]]:
    """Each query's BM25 top-k docids, the order the driver started from."""
    from rearank.data import packs
    from rearank.io.trec import read_run

    top_k = int(suite.config.get("top_k", 100))
    return {qid: [d for d, _ in pairs[:top_k]] for qid, pairs in read_run(packs.resolve(dataset).run).items()}


def _traces(suite: SuiteResult, dataset: str) -> dict[str, list[WindowTrace]]:
    path = suite.path / dataset / TRACES_FILE
    if not path.is_file():
        raise MissingDataError(f"{path} is missing; rerun the suite with --resume")
    return read_traces(path)


def suite_window_scores(suite: SuiteResult, datasets: Sequence[str]) -> list[WindowScore]:
    """Window scores of the finished ``datasets`` of a suite folder (traces + the packs' qrels)."""
    from rearank.data import packs

    scores: list[WindowScore] = []
    for name in datasets:
        qrels, initial = packs.load_qrels(name), _initial_orders(suite, name)
        for qid, traces in _traces(suite, name).items():
            scores += window_scores(initial[qid], traces, qrels.get(qid, {}))
    return scores


def length_report(suite: SuiteResult, datasets: Sequence[str], bins: int = 20) -> tuple[str, list[LengthBin]]:
    """Markdown of the reasoning-length analysis, and its bins."""
    scores = suite_window_scores(suite, datasets)
    table = length_bins(scores, bins)
    tokens, after = [s.completion_tokens for s in scores], [s.after for s in scores]
    if len(set(tokens)) > 1 and len(set(after)) > 1:
        rho = stats.spearmanr(tokens, after)
        correlation = f"rho = {rho.statistic:.3f} (p = {rho.pvalue:.3g}, n = {len(scores)})"
    else:
        correlation = "undefined (every window has the same completion length or the same score)"
    digits = 0 if table[0].high - table[0].low >= 1 else 2
    body = [[f"{b.low:.{digits}f}-{b.high:.{digits}f}", str(b.windows), fmt(None if b.mean_after is None else 100 * b.mean_after),
             MISSING if b.mean_gain is None else f"{100 * b.mean_gain:+.2f}"] for b in table]
    text = "\n".join([
        f"# Reasoning length vs. window nDCG@10 ({suite.label})", "",
        (f"Datasets: {', '.join(datasets)}; {len(scores)} windows with at least one relevant passage, in {len(table)} "
        "equal-width bins of completion tokens. Window nDCG@10 x 100 is computed inside each window (its own "
        "passages give the ideal ranking) after the model's reordering; gain is after minus the presented order."),
        "",
        markdown_table(["Completion tokens", "Windows", "Window nDCG@10 after", "Gain"], body),
        "",
        f"Spearman correlation of completion tokens and window nDCG@10: {correlation}.",
    ])
    return text + "\n", table


def pass_curves(suite: SuiteResult) -> dict[str, list[float]]:
    """Per finished dataset, nDCG@10 after 0 (BM25 order), 1, ..., P passes, replayed from the traces."""
    from rearank.data import packs
    from rearank.measures.ir import evaluate

    passes = int(suite.config.get("passes", 1))
    curves: dict[str, list[float]] = {}
    for name, result in suite.datasets.items():
        judged_qids = set(result.metrics["rerank"]["per_query"])
        qrels = {q: j for q, j in packs.load_qrels(name).items() if q in judged_qids}
        initial, traces = _initial_orders(suite, name), _traces(suite, name)
        curve = []
        for p in range(passes + 1):
            run = {}
            for qid, qt in traces.items():
                order = replay(initial[qid], qt, p)
                run[qid] = [(d, float(len(order) - i)) for i, d in enumerate(order)]
            curve.append(evaluate(qrels, run, ["ndcg_cut.10"]).aggregate[MAIN_MEASURE])
        curves[name] = curve
    return curves


def passes_report(suite: SuiteResult, curves: Mapping[str, Sequence[float]]) -> str:
    """Markdown table of nDCG@10 after each number of passes."""
    passes = max(len(c) for c in curves.values()) - 1
    header = ["Dataset", "0 (BM25)"] + [str(p) for p in range(1, passes + 1)]
    body = [[name] + [fmt(100 * v) for v in curve] for name, curve in curves.items()]
    return "\n".join([f"# nDCG@10 after several reranking passes ({suite.label})", "",
                      "nDCG@10 x 100 after 0..P passes of the window schedule, replayed from one P-pass run.", "",
                      markdown_table(header, body)]) + "\n"


#: ``-O enable_thinking=...`` added to each mode when the thinking switch is used.
THINKING = {"reasoning": "true", "zero-shot": "false"}


def uses_thinking_switch(args: argparse.Namespace) -> bool:
    """``--thinking-switch``: on/off as given; auto: whether the chat template of a local model (a backend that
    declares ``LOCAL_MODEL``) has the switch."""
    if args.thinking_switch != "auto":
        return args.thinking_switch == "on"
    if not declared(args.backend, "LOCAL_MODEL"):
        return False
    from rearank.backends.base import has_thinking_switch
    from rearank.backends.models import resolve_model

    try:
        from transformers import AutoTokenizer

        source = resolve_model(args.model)
        tokenizer = AutoTokenizer.from_pretrained(source.path, gguf_file=source.gguf_file)
    except (ImportError, OSError, ValueError) as err:
        raise RearankError(f"--thinking-switch auto: cannot read the chat template of {args.model!r} ({err}); "
                           "pass --thinking-switch on or off") from None
    return has_thinking_switch(getattr(tokenizer, "chat_template", None))


def reasoning_report(with_reasoning: SuiteResult, without: SuiteResult, label: str, switch: bool = False) -> str:
    """Markdown comparing the reasoning and zero-shot prompts per dataset and per paper average (Table 4)."""
    names = [d for d in with_reasoning.datasets if d in without.datasets]
    on = {d: 100 * with_reasoning.datasets[d].score() for d in names}
    off = {d: 100 * without.datasets[d].score() for d in names}
    body = [[d, fmt(on[d]), fmt(off[d]), f"{on[d] - off[d]:+.2f}"] for d in names]
    for group in GROUPS.values():
        if any(d in on for d in group.datasets):
            body.append([group.label, group_average(on, group), group_average(off, group), MISSING])
    paper = load_paper_figures()["tables"]["table4"]
    published = [[row["model"], {True: "yes", False: "no"}.get(row["reasoning"], "base")]
                 + [fmt(row["averages"].get(g), 1) for g in GROUPS] for row in paper["rows"]]
    return "\n".join([
        f"# Reasoning on and off ({label})", "",
        (f"nDCG@10 x 100 with the reasoning prompt (`{with_reasoning.config.get('template')}`, {with_reasoning.path}) and "
        f"the zero-shot prompt (`{without.config.get('template')}`, {without.path})"
        + (", thinking switched on and off through the chat template (`enable_thinking`)." if switch else ".")), "",
        markdown_table(["Dataset", "Reasoning", "Zero-shot", "Delta"], body), "",
        *[f"- skipped `{d}`: {why}" for d, why in with_reasoning.skipped.items()], "",
        f"## Published: {paper['title']}", "",
        markdown_table(["Model", "Reasoning"] + [g.label for g in GROUPS.values()], published, left=2),
    ]) + "\n"


def _write(path: Path, text: str) -> Path:
    with atomic_write(path) as handle:
        handle.write(text)
    return path


def run_reasoning(args: argparse.Namespace) -> list[Path]:
    """Run the suite with both prompts and write the comparison."""
    apply_defaults(args)
    base = args.label or args.model or args.backend
    switch = uses_thinking_switch(args)
    suites = {}
    for mode, prompt in PROMPTS.items():
        options = list(args.backend_option) + ([f"enable_thinking={THINKING[mode]}"] if switch else [])
        sub = argparse.Namespace(**{**vars(args), "template": prompt, "out": args.out / mode,
                                    "label": f"{base} {mode}", "backend_option": options})
        suites[mode] = suite_run.run_suite(sub)
    text = reasoning_report(suites["reasoning"], suites["zero-shot"], base, switch)
    return [_write(args.out / REASONING_REPORT, text)]


def run_passes(args: argparse.Namespace) -> list[Path]:
    """Run the suite with P passes and write the per-pass curves."""
    suite = suite_run.run_suite(args)
    curves = pass_curves(suite)
    if not curves:
        raise MissingDataError(f"no dataset of {args.suite!r} finished; see {args.out / 'report.md'}")
    paths = [_write(args.out / f"{PASSES_REPORT}.md", passes_report(suite, curves))]
    return paths + [plot_pass_curves(curves, suite.label, args.out / f"{PASSES_REPORT}.png")]


def run_length(args: argparse.Namespace) -> list[Path]:
    """Bin the windows of a finished suite by reasoning length."""
    suite = load_suite(args.results)
    datasets = args.dataset or list(suite.datasets)
    unfinished = [d for d in datasets if d not in suite.datasets]
    if unfinished or not datasets:
        raise MissingDataError(f"{args.results}: no finished dataset {', '.join(unfinished) or ''} to analyse")
    text, table = length_report(suite, datasets, args.bins)
    return [_write(args.results / f"{LENGTH_REPORT}.md", text),
            plot_length_bins(table, f"{suite.label}: {', '.join(datasets)}", args.results / f"{LENGTH_REPORT}.png")]


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m benchmark.analyses`` parser with its three subcommands."""
    parser = argparse.ArgumentParser(prog="python -m benchmark.analyses", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="analysis", required=True)
    reasoning = sub.add_parser("reasoning", help="same model with the reasoning and the zero-shot prompt (Table 4)")
    suite_run.add_arguments(reasoning)
    reasoning.add_argument("--thinking-switch", choices=("auto", "on", "off"), default="auto",
                           help="also switch the chat template's enable_thinking (auto: when the hf/vllm model's "
                           "template has it)")
    reasoning.set_defaults(func=run_reasoning)
    passes = sub.add_parser("passes", help="nDCG@10 after 1..P reranking passes (Figure 7)")
    suite_run.add_arguments(passes)
    passes.set_defaults(func=run_passes, passes=3)
    length = sub.add_parser("length", help="reasoning length vs. window nDCG@10 of a finished suite (Figure 6)")
    reads(length.add_argument("results", type=Path, help="suite result folder"))
    length.add_argument("--dataset", action="append", help="dataset(s) to pool (default: every finished one)")
    length.add_argument("--bins", type=int, default=20, help="equal-width bins of completion tokens")
    length.set_defaults(func=run_length)
    guard_commands(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    args = build_parser().parse_args(argv)
    try:
        paths = args.func(args)
    except RearankError as err:
        print(f"benchmark.analyses: error: {err}", file=sys.stderr)
        return 2
    print("\n".join(str(p) for p in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
