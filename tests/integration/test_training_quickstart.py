"""docs/training-quickstart.md's commands: every training launch dry-runs through recipes/train.sh, every `rearank`
command parses with the CLI's own parser, and every recipe file it names exists."""

import os
import re
import shlex
import subprocess

import pytest

from tests.conftest import ROOT, require

require("verl", "the `train` extra")

DOC = ROOT / "docs" / "training-quickstart.md"


def commands() -> list[str]:
    """The command lines of the page's bash blocks (comments removed)."""
    blocks = re.findall(r"```bash\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    lines = [line.split("  #")[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def launches() -> list[str]:
    return [c for c in commands() if "recipes/train.sh" in c or re.match(r"make train( |$)", c)]


@pytest.mark.parametrize("line", launches())
def test_every_training_launch_dry_runs(line, tmp_path):
    words = shlex.split(line)
    env = {k: v for k, v in os.environ.items() if k not in ("RECIPE", "REARANK_RL_DATA")}
    while "=" in words[0] and not words[0].startswith(("make", "recipes/")):  # VAR=value prefixes
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    if words[0] == "make":
        words += ["DRY_RUN=1"]
    else:
        words[0] = str(ROOT / words[0])
        env["DRY_RUN"] = "1"
    proc = subprocess.run(words, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "verl.trainer.main_ppo" in proc.stdout


@pytest.mark.parametrize("line", [c for c in commands() if c.startswith("rearank ")])
def test_every_rearank_command_parses(line):
    from rearank.cli import build_parser

    args = build_parser().parse_args(shlex.split(line)[1:])
    assert args.command == shlex.split(line)[1]


def test_named_recipe_files_exist():
    for path in re.findall(r"recipes/[\w/]+\.yaml", DOC.read_text()):
        assert (ROOT / path).is_file(), path
    for path in re.findall(r"`(\w+)\.yaml`", DOC.read_text()):
        assert list((ROOT / "recipes").glob(f"*/{path}.yaml")), path
