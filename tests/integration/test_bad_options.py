"""Every option is checked before anything is written: the walk gives every option of every command a bad value
(a number below its range or not a number, an empty or spaced run tag, a device this machine lacks, a flag of
another method or strategy) and asserts one line on stderr, no traceback and no file created.

``rerank``, ``benchmark`` and ``rag eval`` get real inputs (the dl19 pack or HotpotQA questions, the oracles), so a
value checked late would leave files behind; ``serve`` stops where it would build the service; the other commands get absent inputs, so
the walk asserts they create nothing (no lock file either) and print no traceback.
"""

from __future__ import annotations

import argparse

import pytest

from rearank.cli import build_parser, main
from rearank.cli import serve as serve_cli
from tests.conftest import require_pack
from tests.parsers import command_line, commands, shown

QA = "hotpotqa/dev_distractor.first103.json"

#: Options for which a negative number is a fine value.
ANY_NUMBER = {"seed"}
#: Bad values of options that are no plain number, by dest.
BAD = {"tag": ["", "a b"], "fail_share": ["2", "nan"], "passage_budget": ["12x"], "port": ["70000", "-1"]}
#: Devices no machine of the tests has (``cuda`` and ``mps`` are skipped where torch sees one).
DEVICES = ["device=bogus", "device=cuda:99", "device=cuda", "device=mps"]
#: Flags that do not go together, or settings a backend refuses: each is refused, whatever its place.
BAD_PAIRS = {("rerank",): [["--strategy", "tdpart", "--step", "3"], ["--group-size", "5"],
                           ["--method", "groupwise", "--window", "5"],
                           *(["--backend", "hf", "-O", device] for device in DEVICES),
                           ["--method", "pointwise", "--backend", "scorer", "-O", "device=cuda:99"]],
             ("benchmark",): [["--backend", "hf", "-O", "device=cuda"], ["--step", "3", "--strategy", "tdpart"]],
             ("serve",): [["--mcp", "http", "--port", "70000"], ["--mcp", "http", "--port", "-1"]],
             ("rag", "eval"): [["--reader", "hf", "-R", "device=cuda:99"], ["--reader", "hf", "-R", "device=bogus"]]}


def bad_values(action: argparse.Action) -> list[str]:
    if action.dest in BAD:
        return BAD[action.dest]
    if action.type is int and action.dest not in ANY_NUMBER:
        return ["-1"]
    if action.type is float:
        return ["-1", "nan"]
    return []


def real_inputs(path: tuple[str, ...], tmp) -> list[str] | None:
    """A command line of ``path`` that runs and writes under ``tmp`` (None: the walk fills absent inputs)."""
    if path == ("rerank",):
        return ["rerank", "--dataset", "dl19", "--backend", "oracle", "--max-queries", "1", "--no-progress",
                "--output", str(tmp / "out" / "run.trec")]
    if path == ("benchmark",):
        return ["benchmark", "--suite", "dl19", "--backend", "oracle", "--max-queries", "1", "--no-progress",
                "--output-dir", str(tmp / "out")]
    if path == ("rag", "eval"):
        return ["rag", "eval", "--data", str(require_pack("qa") / QA), "--limit", "1", "--k", "1", "--reader",
                "gold", "--no-progress", "--output-dir", str(tmp / "out")]
    return None


def cases():
    for path, parser in commands(build_parser()):
        for action in shown(parser):
            for value in bad_values(action) if action.option_strings else []:
                yield pytest.param(path, [action.option_strings[0], value],
                                   id=f"{' '.join(path)} {action.option_strings[0]}={value!r}")
        for flags in BAD_PAIRS.get(path, []):
            yield pytest.param(path, flags, id=f"{' '.join(path)} {' '.join(flags)}")


def files_under(folder) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


@pytest.fixture
def dl19_env(dl19, monkeypatch):
    monkeypatch.setenv("REARANK_DATA", str(dl19.parents[1]))


@pytest.mark.parametrize(("path", "flags"), list(cases()))
def test_a_bad_value_is_refused_in_one_line_before_any_file_is_written(path, flags, tmp_path, monkeypatch, capsys,
                                                                       request):
    if flags[-1] in ("device=cuda", "device=mps"):
        import torch

        if torch.cuda.is_available() if flags[-1] == "device=cuda" else torch.backends.mps.is_available():
            pytest.skip(f"this machine has the device ({flags[-1]})")

    def too_far(args):
        raise AssertionError(f"serve {flags} reached the model and the socket")

    monkeypatch.setattr(serve_cli, "build_service", too_far)
    if path in (("rerank",), ("benchmark",)):
        request.getfixturevalue("dl19_env")
    monkeypatch.chdir(tmp_path)
    parser = dict(commands(build_parser()))[path]
    argv = real_inputs(path, tmp_path) or command_line(path, parser, {}, tmp_path)
    before = files_under(tmp_path)
    try:
        code = main([*argv, *flags])
    except SystemExit as exit_info:  # refused by argparse, as it parses
        code = exit_info.code
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [line for line in err.strip().splitlines() if not line.startswith(("usage:", " "))]  # argparse's usage
    assert "Traceback" not in err and len(lines) == 1 and "error:" in lines[0], err
    assert files_under(tmp_path) == before, f"{' '.join([*argv, *flags])} left {files_under(tmp_path) - before}"
    if real_inputs(path, tmp_path) is not None:
        assert "unknown dataset" not in err and "not found" not in err, err  # refused for the value, not the input


def test_the_walk_meets_the_options_of_the_issue():
    met = {(c.values[0], tuple(c.values[1])) for c in cases()}
    assert {(("rerank",), ("--tag", "")), (("rerank",), ("--tag", "a b")),
            (("rerank",), ("--backend", "hf", "-O", "device=cuda")), (("serve",), ("--port", "70000")),
            (("serve",), ("--port", "-1")), (("benchmark",), ("--fail-share", "2"))} <= met


def test_the_real_inputs_run_when_no_value_is_bad(dl19_env, tmp_path, capsys):
    """The command lines the walk starts from are good: without a bad value they run and write their outputs."""
    for path in (("rerank",), ("benchmark",), ("rag", "eval")):
        assert main(real_inputs(path, tmp_path / path[0])) == 0, capsys.readouterr().err
    assert (tmp_path / "rerank" / "out" / "run.trec").is_file()
    assert (tmp_path / "benchmark" / "out" / "dl19" / "run.trec").is_file()
    assert (tmp_path / "rag" / "out" / "items.jsonl").is_file()
