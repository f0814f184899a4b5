"""The ARENA CPU smoke: a few TRL GRPO steps of SmolLM2 on ARENA rows with the ARENA reward."""

import json
import math
import os

import pytest

from tests.conftest import data_root, require, require_pack

pytestmark = pytest.mark.slow


def test_arena_grpo_smoke_logs_finite_metrics(tmp_path):
    require("trl", "TRL is in the `train` extra")
    require_pack("qa")
    os.environ.setdefault("REARANK_DATA", str(data_root()))
    from recipes.checks.smoke import main

    metrics = tmp_path / "metrics.json"
    assert main(["--family", "arena", "--steps", "2", "--metrics", str(metrics)]) == 0
    logs = json.loads(metrics.read_text())
    assert [entry["step"] for entry in logs] == [1, 2]
    for entry in logs:
        for name in ("reward", "reward_std", "kl", "completions/mean_length", "arena/format", "arena/relevance"):
            assert math.isfinite(entry[name]), (name, entry)
        # ARENA totals lie in {0, 0.5, ..., 3, 13}; completions are cut at 48 tokens
        assert 0.0 <= entry["reward"] <= 13.0 and 0 < entry["completions/mean_length"] <= 48
