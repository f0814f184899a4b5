"""Renamed flags: the new spelling is shown and required, the old one still accepted but hidden."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from rearank.flags import add_renamed


def parser(required: bool) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="t")
    add_renamed(p, ["--output-dir"], ["--output", "-o"], type=Path, required=required, metavar="DIR", help="folder")
    return p


def test_old_spellings_are_hidden_aliases(capsys):
    for argv in (["--output-dir", "a"], ["--output", "a"], ["-o", "a"]):
        assert parser(True).parse_args(argv).output_dir == Path("a")
    help_text = parser(True).format_help()
    words = help_text.replace(",", " ").split()
    assert "--output-dir" in words and "--output" not in words and "-o" not in words
    with pytest.raises(SystemExit):
        parser(True).parse_args([])
    assert "--output-dir" in capsys.readouterr().err


def test_default_comes_from_the_shown_option():
    p = argparse.ArgumentParser(prog="t")
    add_renamed(p, ["--output-dir"], ["--out"], type=Path, default=Path("out/demo"))
    assert p.parse_args([]).output_dir == Path("out/demo")
    assert p.parse_args(["--out", "x"]).output_dir == Path("x")
    assert parser(False).parse_args([]).output_dir is None
