"""One spelling per flag: no command of the command line declares a hidden option, no option matches by a prefix,
and the retired spellings of ``--method``, ``--template``, ``--passage-budget``, ``-O batch_size=N`` and the
output folders are unknown options."""

from __future__ import annotations

import argparse

import pytest

from rearank.cli import build_parser
from tests.parsers import commands


def test_no_command_declares_a_hidden_option():
    parsers = dict(commands(build_parser()))
    assert {("rerank",), ("benchmark",), ("serve",), ("rag", "eval")} <= set(parsers)
    hidden = [f"{' '.join(path)} {'/'.join(action.option_strings)}" for path, parser in parsers.items()
              for action in parser._actions if action.help == argparse.SUPPRESS]
    assert hidden == []


@pytest.mark.parametrize(("argv", "retired"), [
    (["rerank", "--dataset", "dl19", "-o", "x", "--mode", "groupwise"], "--mode"),
    (["rerank", "--dataset", "dl19", "-o", "x", "--prompt", "rankgpt"], "--prompt"),
    (["rerank", "--dataset", "dl19", "-o", "x", "--max-passage-tokens", "40"], "--max-passage-tokens"),
    (["benchmark", "--suite", "dl19", "--output-dir", "x", "--mode", "groupwise"], "--mode"),
    (["serve", "--backend", "oracle", "--max-batch-queries", "4"], "--max-batch-queries"),
    (["rag", "eval", "--data", "qa.json", "--output-dir", "y", "-o", "x"], "-o"),
    (["rag", "eval", "--data", "qa.json", "--output-dir", "y", "--output", "x"], "--output"),
    (["benchmark", "--suite", "dl19", "--output-dir", "y", "--out", "x"], "--out"),
])
def test_a_retired_spelling_is_an_unknown_option(capsys, argv, retired):
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(argv)
    assert exit_info.value.code == 2
    assert f"unrecognized arguments: {retired}" in capsys.readouterr().err


def test_a_prefix_of_an_option_is_not_that_option(capsys):
    # --mode would otherwise be read as --model
    parsers = dict(commands(build_parser()))
    assert not any(parser.allow_abbrev for parser in parsers.values())
    with pytest.raises(SystemExit):
        build_parser().parse_args(["rerank", "--dataset", "dl19", "-o", "x", "--max-new", "5"])
    assert "unrecognized arguments: --max-new" in capsys.readouterr().err
