"""RRPO CPU smoke (bench/bench_rrpo.py, shortened): a 2-layer SmolLM2 "yes" scorer trained against the oracle
reader raises the held-out mean step reward above the reference scorer's."""

from __future__ import annotations

import argparse
import importlib.util

import pytest

from tests.conftest import ROOT, require_pack

pytestmark = pytest.mark.slow


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_rrpo", ROOT / "bench" / "bench_rrpo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rrpo_raises_heldout_reward(tmp_path):
    data = require_pack("qa") / "hotpotqa"
    args = argparse.Namespace(
        train=data / "train_distractor.sample100.json", heldout=data / "dev_distractor.first103.json",
        train_limit=64, heldout_limit=40, reader="gold", require="any", epochs=1, ppo_epochs=1, k=2, layers=2,
        passage_tokens=48, batch=8, lr=2e-4, seed=0,
    )
    result = load_bench().run(args, tmp_path / "rrpo")
    (_, reference), *_, (_, trained) = result["curve"]
    assert trained["mean_step_reward"] > reference["mean_step_reward"]
    # the reference is frozen: its greedy baseline is one reader call per training question and step
    assert result["baseline_calls"] == 64 * 2
