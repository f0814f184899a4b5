"""``recipes/gpu/run.sh``, the GPU run's one entry, on CPU: the assets as the carry holds them, then the doctor, verl
GRPO steps through train.sh's command, a resume, the export, a rerank with it and gpu_train.json."""

import json
import math
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, data_root, require, require_pack

require("verl", "the `train` extra")
require("transfer_queue", "the `train` extra (verl's V1 trainer imports it)")

pytestmark = [pytest.mark.slow, pytest.mark.train_all]  # heavy verl runs: `make test-train-all`, not CI


def test_the_gpu_run_script_runs_on_cpu(tmp_path):
    require_pack("msmarco-v2-passage/dl21")
    require_pack("msmarco-v1-passage/dl19")
    env = {**os.environ, "REARANK_DATA": str(data_root()), "PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    assets = tmp_path / "assets"
    proc = subprocess.run([sys.executable, "-m", "recipes.gpu.carry", "assets", str(assets)], capture_output=True,
                          text=True, check=False, timeout=1800, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert sorted(p.name for p in assets.iterdir()) == ["data", "model", "rl"]  # what the carry's assets/ holds

    out = tmp_path / "out"
    cmd = [str(ROOT / "recipes" / "gpu" / "run.sh"), "--carry", "none", "--assets", str(assets), "--out", str(out),
           "--device", "cpu", "--steps", "1"]  # one step and the resumed second: the GPU run's 3 + 1 cost CI minutes
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=3600, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == f"gpu run: {out / 'gpu_train.json'}"

    data = json.loads((out / "gpu_train.json").read_text())
    assert data["device"]["kind"] == "cpu" and data["versions"]["verl"] == "0.9.1"
    assert data["steps"] == [1, 2] and data["resumed_from_step"] == 1
    assert all(math.isfinite(v) for v in data["pg_loss"]) and all(v > 0 for v in data["grad_norm"])
    assert all(v > 0 for v in data["step_s"]) and data["peak_memory_allocated_gb"] > 0
    assert data["doctor"]["verl"] == "ok" and data["doctor"]["driver"] == "missing"  # no GPU here: reported
    assert data["rerank"]["queries"] == 2 and data["rerank"]["lines"] >= 20
    folder = out / "run"
    ckpt = folder / "checkpoints" / "gpu_run" / "rearank_tiny"
    assert f"Resuming from {ckpt / 'global_step_1'}" in (folder / "logs" / "verl.2.log").read_text()
    first = (folder / "logs" / "verl.1.log").read_text().splitlines()[0]
    assert "verl.trainer.main_ppo" in first and f"{ROOT / 'recipes' / 'rearank'}" in first  # train.sh's command

    again = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=600, env=env, cwd=tmp_path)
    assert again.returncode == 1 and "gpu_train.json exists; pass --overwrite" in again.stderr
