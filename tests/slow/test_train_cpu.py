"""``make train-cpu`` for each verl recipe: the real ``verl.trainer.main_ppo`` on CPU (plugin recipes.verl_cpu) for 2
steps, a resumed run for a 3rd, verl's checkpoints, the export, and the exported model at work on two items."""

import json
import math
import os
import subprocess
import sys

import pytest

from tests.conftest import data_root, require, require_pack

require("verl", "the `train` extra")
require("transfer_queue", "the `train` extra (verl's V1 trainer imports it)")

pytestmark = pytest.mark.slow


def train_cpu(recipe, out):
    proc = subprocess.run([sys.executable, "-m", "recipes.train_cpu", "--recipe", recipe, "--out", str(out)],
                          capture_output=True, text=True, check=False, timeout=3600,
                          env={**os.environ, "REARANK_DATA": str(data_root())})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def check_stage(folder):
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    assert [row["training/global_step"] for row in rows] == [1, 2, 3]
    for row in rows:
        assert math.isfinite(row["actor/pg_loss"]) and row["actor/grad_norm"] > 0
        assert math.isfinite(row["critic/score/mean"])
    for step in (1, 2, 3):
        assert (folder / "checkpoints" / f"global_step_{step}" / "actor").is_dir()
    resumed = f"Resuming from {folder / 'checkpoints' / 'global_step_2'}, setting global step to 2"
    assert resumed in (folder / "logs" / "verl.2.log").read_text()
    assert (folder / "export" / "config.json").is_file() and list((folder / "export").glob("*.safetensors"))


@pytest.mark.parametrize("recipe", ["rearank", pytest.param("grouprank", marks=pytest.mark.train_all)])
def test_listwise_and_groupwise_recipes_train_resume_export_and_rerank(recipe, tmp_path):
    require_pack("msmarco-v2-passage/dl21")
    require_pack("msmarco-v1-passage/dl19")
    out = train_cpu(recipe, tmp_path)
    folder = tmp_path / recipe
    assert f"{recipe}: metrics {folder / 'metrics.jsonl'}" in out and f"{recipe}: export {folder / 'export'}" in out
    check_stage(folder)
    run = (folder / "use" / "run.trec").read_text().splitlines()
    assert len({line.split()[0] for line in run}) == 2 and len(run) >= 20  # two dl19 queries, reranked


@pytest.mark.train_all
def test_reasonrank_recipe_takes_real_grpo_steps_with_its_reward(tmp_path):
    """ReasonRank's GRPO steps alone (its resume, export and rerank are rearank's machinery, checked above)."""
    require_pack("msmarco-v2-passage/dl21")
    out = train_cpu("reasonrank", tmp_path)
    folder = tmp_path / "reasonrank"
    assert f"reasonrank: metrics {folder / 'metrics.jsonl'}" in out
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    assert [row["training/global_step"] for row in rows] == [1, 2]
    for row in rows:
        assert math.isfinite(row["actor/pg_loss"]) and row["actor/grad_norm"] > 0
        assert -1.0 <= row["critic/score/mean"] <= 1.3  # the ReasonRank reward's range
    assert (folder / "checkpoints" / "global_step_2" / "actor").is_dir()


@pytest.mark.train_all
@pytest.mark.parametrize("recipe, stages", [("barrag", ["barrag_selector", "barrag_generator"]),
                                            ("arena", ["arena"])])
def test_rag_recipes_train_resume_export_and_answer(recipe, stages, tmp_path):
    require_pack("qa")
    train_cpu(recipe, tmp_path)
    for stage in stages:
        check_stage(tmp_path / stage)
        items = (tmp_path / stage / "use" / "items.jsonl").read_text().splitlines()
        assert len(items) == 2
