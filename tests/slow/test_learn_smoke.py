"""``make train-learn``'s mechanics at a toy size with the real SmolLM2-135M and verl: the plan on record before
training, 2 SFT steps, 2 GRPO steps, checkpoints evaluated on 16 held-out dl19 windows, the paired tests, the
baselines, the per-item outcomes, and ``--report-only`` reading the plan rather than its own command line."""

import gzip
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import data_root, require, require_pack

require("verl", "the `train` extra")
require("transfer_queue", "the `train` extra (verl's V1 trainer imports it)")

pytestmark = [pytest.mark.slow, pytest.mark.train_all]  # heavy verl runs: `make test-train-all`, not CI

TOY = ["--task", "relevance", "--windows-per-query", "4", "--heldout", "16", "--sft-steps", "2", "--sft-batch", "4",
       "--sft-check-every", "2", "--gate-prompts", "8", "--grpo-steps", "2", "--prompts-per-step", "4",
       "--rollouts", "2", "--eval-every", "1", "--ignore-gate"]


def learn(tmp_path, *args):
    proc = subprocess.run([sys.executable, "-m", "recipes.learn", "--out", str(tmp_path / "runs"), "--output",
                           str(tmp_path / "fig.json"), *args], capture_output=True, text=True, check=False,
                          timeout=1800, env={**os.environ, "REARANK_DATA": str(data_root())})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def test_the_relevance_pipeline_runs_its_plan_at_a_toy_size(tmp_path):
    require_pack("msmarco-v2-passage/dl21")
    require_pack("msmarco-v1-passage/dl19")
    out = learn(tmp_path, *TOY)
    entry = json.loads((tmp_path / "fig.json").read_text())["tasks"]["relevance"]
    assert entry["plan"]["evaluation_steps"] == [0, 1, 2] and entry["missing_evaluations"] == []
    assert [(e["stage"], e["step"], e["items"]) for e in entry["evaluations"]] == [
        ("base", 0, 16), ("warm start", 0, 16), ("grpo", 1, 16), ("grpo", 2, 16)]
    test = entry["paired_test"]
    assert test["items"] == 16 and 0 < test["per_item"]["p_value"] <= 1 and 0 < test["per_query"]["p_value"] <= 1
    assert entry["warm_start_test"]["items"] == 16 and entry["warm_start_test"]["candidate"] == "the warm start"
    assert entry["baselines"]["constant_position"] == {"1": 0.25, "2": 0.25, "3": 0.25, "4": 0.25}
    assert [row["step"] for row in entry["training"]] == [1, 2]
    with gzip.open(tmp_path / "fig_relevance_outcomes.jsonl.gz", "rt") as rows:
        outcomes = [json.loads(line) for line in rows]
    assert len(outcomes) == 4 * 16 and {o["answer"] for o in outcomes} <= {1, 2, 3, 4}
    assert (tmp_path / "fig.png").stat().st_size > 0
    assert "relevance: target" in out
    # --report-only: the recorded plan's settings decide, not the command line's
    learn(tmp_path, "--task", "relevance", "--report-only", "--grpo-steps", "9", "--eval-every", "3")
    again = json.loads((tmp_path / "fig.json").read_text())["tasks"]["relevance"]
    assert again["plan"] == entry["plan"] and [e["step"] for e in again["evaluations"]] == [0, 0, 1, 2]
