"""A list flag given twice keeps both: every repeatable or many-valued flag of every command accumulates.

``rearank rag corpus --qa A --qa B --qa C`` pooled only C while ``--qa`` stored its last list; each list flag is
now ``action="extend"`` (many values) or ``"append"`` (one value a repeat). The walk covers every parser of
``rearank`` (``synth`` and ``benchmark`` included), ``python -m benchmark.run`` and ``python -m benchmark.analyses``.
"""

from __future__ import annotations

import argparse

import pytest

from benchmark import analyses
from benchmark import run as suite_run
from rearank.cli import build_parser
from tests.parsers import command_line, commands, shown


def eval_run_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmark.run")
    suite_run.add_arguments(parser)
    return parser


def parsers():
    yield from ((("rearank", *path), p) for path, p in commands(build_parser()))
    yield (("python -m benchmark.run",), eval_run_parser())
    yield from ((("python -m benchmark.analyses", *path), p) for path, p in commands(analyses.build_parser()))


def takes_a_list(action: argparse.Action) -> bool:
    return bool(action.option_strings) and (action.nargs in ("+", "*", argparse.ONE_OR_MORE)
                                            or isinstance(action, (argparse._AppendAction, argparse._ExtendAction)))


def list_flags():
    for path, parser in parsers():
        for action in shown(parser):
            if takes_a_list(action):
                yield pytest.param(path, parser, action, id=f"{' '.join(path)} {action.option_strings[0]}")


def values(action: argparse.Action, n: int) -> list[str]:
    if action.choices:
        choices = [str(c) for c in action.choices]
        return [choices[i % len(choices)] for i in range(n)]
    if action.type in (int, float):
        return [str(i + 1) for i in range(n)]
    return [f"key{i}=value{i}" for i in range(n)]  # a valid KEY=VALUE, a file name, a measure name alike


def test_the_walk_reaches_the_list_flags():
    found = {(path, action.option_strings[0]) for path, _, action in (p.values for p in list_flags())}
    assert {(("rearank", "rag", "corpus"), "--qa"), (("rearank", "synth"), "--qa"),
            (("rearank", "rerank"), "--backend-option"), (("rearank", "view"), "--plots")} <= found


@pytest.mark.parametrize(("path", "parser", "action"), list(list_flags()))
def test_a_list_flag_given_again_adds_to_it(path, parser, action, tmp_path):
    many = action.nargs in ("+", "*")
    first, second, third = values(action, 3)
    flag = action.option_strings[0]
    repeat = [flag, first, second] if many else [flag, first]
    argv = command_line((), parser, {action: third}, tmp_path)
    args = parser.parse_args([*repeat, *argv])
    given = [first, second, third] if many else [first, third]
    convert = action.type if callable(action.type) else str
    got = getattr(args, action.dest)
    assert list(got)[-len(given):] == [convert(v) for v in given], f"{' '.join(path)} {flag}: {got}"
