"""Modules moved into their method's folder, the engine's, run's or backends' package keep their old import paths:
each old path is the moved module itself (so ``pkg://rearank.reward`` gives verl the same ``compute_score``, and a
patch through the old path reaches the code that runs), and a reward loaded by its old file's path finds the same
functions."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Old module path -> where it lives now.
MOVED = {
    "rearank.answer": "rearank.methods.listwise.answer",
    "rearank.window": "rearank.methods.listwise.window",
    "rearank.reward": "rearank.methods.listwise.reward",
    "rearank.grouprank.parser": "rearank.methods.groupwise.parser",
    "rearank.grouprank.reward": "rearank.methods.groupwise.reward",
    "rearank.grouprank.oracle": "rearank.methods.groupwise.oracle",
    "rearank.grouprank.labels": "rearank.methods.groupwise.labels",
    "rearank.grouprank.presets": "rearank.methods.groupwise.presets",
    "rearank.grouprank.prompt": "rearank.methods.groupwise.prompt",
    "rearank.grouprank.rbo": "rearank.methods.groupwise.rbo",
    "rearank.concurrency": "rearank.engine.concurrency",
    "rearank.rounds": "rearank.engine.journal",
    "rearank.ray_engine": "rearank.engine.ray",
    "rearank.serve": "rearank.backends.chat_server",
    "rearank.job": "rearank.run.job",
    "rearank.runfiles": "rearank.run.files",
    "rearank.stats": "rearank.run.stats",
    **{f"rearank.rag.barrag.{m}": f"rearank.methods.barrag.{m}" for m in ("parser", "prompt", "grammar", "reward",
                                                                          "reader")},
    **{f"rearank.rag.arena.{m}": f"rearank.methods.arena.{m}" for m in ("parser", "prompt", "grammar", "reward")},
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_is_the_moved_module(old):
    module = importlib.import_module(old)
    assert module is importlib.import_module(MOVED[old])
    assert Path(module.__file__) == ROOT.joinpath(*MOVED[old].split(".")).with_suffix(".py")


@pytest.mark.parametrize(("old_file", "new", "function"), [
    ("rearank/reward.py", "rearank.methods.listwise.reward", "compute_score"),
    ("rearank/grouprank/reward.py", "rearank.methods.groupwise.reward", "compute_score"),
    ("rearank/rag/arena/reward.py", "rearank.methods.arena.reward", "compute_score"),
    ("rearank/rag/barrag/reward.py", "rearank.methods.barrag.reward", "compute_generator_score"),
    ("rearank/rag/barrag/reward.py", "rearank.methods.barrag.reward", "compute_selector_score"),
])
def test_a_reward_loaded_by_its_old_file_gives_the_same_function(old_file, new, function):
    spec = importlib.util.spec_from_file_location("custom_reward_by_path", ROOT / old_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert getattr(module, function) is getattr(importlib.import_module(new), function)


def test_the_old_packages_export_what_they_did():
    from rearank.grouprank import GROUPRANK_TEMPLATE, load_group_template, parse_scores
    from rearank.methods.groupwise import Groupwise
    from rearank.methods.groupwise import parse_scores as moved_parse
    from rearank.methods.listwise import Listwise, check_budget

    assert parse_scores is moved_parse
    assert GROUPRANK_TEMPLATE.is_file() and load_group_template().name
    assert Groupwise.name == "groupwise" and Listwise.name == "listwise" and callable(check_budget)


def test_the_engine_package_exports_what_the_engine_module_did():
    from rearank.engine import STREAM_POLL_S, THROTTLE_CHECK_S, Engine, EngineCounts, check_batch_size, loop

    assert (Engine, EngineCounts, check_batch_size) == (loop.Engine, loop.EngineCounts, loop.check_batch_size)
    assert (STREAM_POLL_S, THROTTLE_CHECK_S) == (loop.STREAM_POLL_S, loop.THROTTLE_CHECK_S)


def test_the_chat_server_still_starts_by_its_old_module_path():
    out = subprocess.run([sys.executable, "-m", "rearank.serve", "--help"], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout
    assert out.startswith("usage: python -m rearank.serve") and "--backend" in out
