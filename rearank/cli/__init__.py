"""The ``rearank`` command line: one argparse front whose subcommands plug in by entry point.

Each subcommand module exposes ``register(subparsers)``, which adds its parser and sets
``func`` (taking the parsed args, returning an exit code). Packages other than ``rearank``
(``data_synthesis``, ``eval``) add commands through the ``rearank.commands`` entry-point
group, so ``rearank`` itself imports none of them. Flags marked as inputs and outputs
(:func:`rearank.io.outputs.reads`, ``writes``) are checked before any command runs: no output is an input.
Options match by their full spelling only (no argparse abbreviations), so one flag has one spelling.
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import entry_points

from rearank.errors import RearankError
from rearank.io.outputs import guard_commands


def build_parser() -> argparse.ArgumentParser:
    """Build the top-level parser with every registered subcommand."""
    parser = argparse.ArgumentParser(
        prog="rearank",
        description="Listwise reasoning LLM reranking: rerank TREC/BEIR runs, evaluate, build BM25 runs, "
        "synthesize RL training data.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for ep in sorted(entry_points(group="rearank.commands"), key=lambda e: e.name):
        try:
            ep.load()(sub)
        except Exception as err:  # noqa: BLE001 - a broken plugin must not take the other commands down
            _register_unavailable(sub, ep.name, f"{type(err).__name__}: {err}")
    guard_commands(parser)  # no command writes over one of its inputs
    _exact_options(parser)
    return parser


def _exact_options(parser: argparse.ArgumentParser) -> None:
    """Turn off argparse's abbreviations in ``parser`` and its subcommands: a prefix of an option (``--mode`` of
    ``--model``) is an unknown option, not that option."""
    parser.allow_abbrev = False
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _exact_options(sub)


def _register_unavailable(sub: argparse._SubParsersAction, name: str, reason: str) -> None:
    """Keep a command whose module fails to import visible, with the reason as its error."""

    def fail(_args: argparse.Namespace) -> int:
        raise RearankError(f"this command could not be loaded ({reason}); reinstall with `make setup`")

    if name in sub.choices:  # registration failed half-way: keep its parser, make it fail clearly
        sub.choices[name].set_defaults(func=fail)
        return
    p = sub.add_parser(name, help=f"(unavailable: {reason[:60]})")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=fail)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; errors the user can fix print one clear line and exit 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except RearankError as err:
        print(f"rearank {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"rearank {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
