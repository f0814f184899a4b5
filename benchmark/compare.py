"""Compare two suite result folders per dataset with paired significance tests on per-query nDCG@10.

``python -m benchmark.compare A B [--measure ndcg_cut_10] [--permutations 10000] [--seed 0]`` prints, per
dataset both folders finished, the mean of A and B, delta (B - A), the paired t-test p-value (scipy),
the paired randomization (sign-flip) test p-value and B's wins/ties/losses against A. ``rearank compare`` adds
what differs between the two, window by window (:mod:`rearank.run.drift`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from benchmark.results import MAIN_MEASURE, MEASURES, SuiteResult, load_suite
from benchmark.tables import fmt, markdown_table
from rearank.errors import RearankError
from rearank.measures.significance import Comparison, paired_comparison


def compare(a: SuiteResult, b: SuiteResult, measure: str = MAIN_MEASURE, permutations: int = 10000,
            seed: int = 0) -> list[Comparison]:
    """Per dataset finished in both folders, paired on the queries both evaluated."""
    out = []
    for name in a.datasets:
        if name in b.datasets:
            row = paired_comparison(name, a.datasets[name].per_query(measure=measure),
                                    b.datasets[name].per_query(measure=measure), permutations, seed)
            if row is not None:
                out.append(row)
    return out


def comparison_table(rows: Sequence[Comparison], a: str, b: str, measure: str = MAIN_MEASURE) -> str:
    """Markdown table of comparisons, scores x 100."""
    label = MEASURES.get(measure, measure)
    header = ["Dataset", "Queries", f"{label} A", f"{label} B", "Delta (B-A)", "t-test p", "randomization p",
              "B wins/ties/losses"]
    body = [[r.dataset, str(r.queries), fmt(100 * r.mean_a), fmt(100 * r.mean_b), f"{100 * r.delta:+.2f}",
             f"{r.t_p:.4f}", f"{r.randomization_p:.4f}", f"{r.wins}/{r.ties}/{r.losses}"] for r in rows]
    return f"A = {a}\nB = {b}\n\n" + markdown_table(header, body)


def main(argv: list[str] | None = None) -> int:
    """CLI: print the comparison table of two result folders."""
    parser = argparse.ArgumentParser(prog="python -m benchmark.compare", description=__doc__.splitlines()[0])
    parser.add_argument("a", help="baseline result folder (A)")
    parser.add_argument("b", help="result folder compared against it (B)")
    parser.add_argument("--measure", default=MAIN_MEASURE, help="trec_eval measure name (default ndcg_cut_10)")
    parser.add_argument("--permutations", type=int, default=10000, help="randomization test samples")
    parser.add_argument("--seed", type=int, default=0, help="randomization test seed")
    args = parser.parse_args(argv)
    try:
        a, b = load_suite(args.a), load_suite(args.b)
        rows = compare(a, b, args.measure, args.permutations, args.seed)
        if not rows:
            raise RearankError(f"{args.a} and {args.b} have no finished dataset in common")
    except RearankError as err:
        print(f"benchmark.compare: error: {err}", file=sys.stderr)
        return 2
    print(comparison_table(rows, f"{a.label} ({args.a})", f"{b.label} ({args.b})", args.measure))
    return 0


if __name__ == "__main__":
    sys.exit(main())
