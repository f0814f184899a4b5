"""``rearank benchmark``: the suite runner of :mod:`benchmark.run` as a ``rearank`` subcommand (same parser)."""

from __future__ import annotations

import argparse

from benchmark import run as suite_run


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``benchmark`` subcommand."""
    parser = subparsers.add_parser(
        "benchmark",
        help="run a reranker over a benchmark suite (TREC-DL, BEIR, BRIGHT) and write paper-style tables",
        description=suite_run.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    suite_run.add_arguments(parser, checks=True)
    parser.set_defaults(func=suite_run.run)
