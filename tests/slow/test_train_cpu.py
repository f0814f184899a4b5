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


def train_cpu(recipe, out, *args):
    proc = subprocess.run([sys.executable, "-m", "recipes.checks.cpu", "--recipe", recipe, "--out", str(out), *args],
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


def check_reranked(out, recipe, folder):
    assert f"{recipe}: metrics {folder / 'metrics.jsonl'}" in out and f"{recipe}: export {folder / 'export'}" in out
    check_stage(folder)
    run = (folder / "use" / "run.trec").read_text().splitlines()
    assert len({line.split()[0] for line in run}) == 2 and len(run) >= 20  # two dl19 queries, reranked


@pytest.mark.train_all
def test_listwise_recipe_trains_resumes_exports_and_reranks(tmp_path):
    require_pack("msmarco-v2-passage/dl21")
    require_pack("msmarco-v1-passage/dl19")
    check_reranked(train_cpu("rearank", tmp_path), "rearank", tmp_path / "rearank")


def test_grouprank_on_a_two_node_ray_cluster_starts_from_its_sft_folder(tmp_path):
    """Two Ray nodes on this machine, each with its own CPUs and one declared GPU slot: the GroupRank recipe's FSDP
    ranks (gloo) run on both, and its GRPO starts from the folder named by GROUPRANK_SFT_MODEL, which reaches the
    workers only through verl's runtime_env (the nodes were started without it). Then resume, export, rerank."""
    import re

    from ray.cluster_utils import Cluster

    require_pack("msmarco-v2-passage/dl21")
    require_pack("msmarco-v1-passage/dl19")
    assert "GROUPRANK_SFT_MODEL" not in os.environ
    node = {"num_cpus": 8, "num_gpus": 1, "object_store_memory": 300 * 1024 * 1024}
    cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    try:
        cluster.add_node(**node)
        cluster.wait_for_nodes()
        out = train_cpu("grouprank", tmp_path, "--ray-address", cluster.address, "--nnodes", "2")
    finally:
        cluster.shutdown()
    folder = tmp_path / "grouprank"
    check_reranked(out, "grouprank", folder)
    for run in (1, 2):
        log = (folder / "logs" / f"verl.{run}.log").read_text(errors="replace")
        # the recipe's own ${oc.env:GROUPRANK_SFT_MODEL,Qwen/...} resolved to the warm-started folder on the workers
        assert f"transformers rollout server 0: {folder / 'tiny-model'} on" in log
        ranks = dict(re.findall(r"transformers rollout adapter: rank (\d+), replica \d+, node (\w+)", log))
        assert sorted(ranks) == ["0", "1"] and len(set(ranks.values())) == 2, ranks  # one FSDP rank a node


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


def test_a_dead_rollout_server_ends_the_run_with_one_clear_error(tmp_path):
    """Killing the rollout server mid-run: the trainer's watch names it and the run exits non-zero (verl alone
    retries the failed groups and waits forever)."""
    import time

    import psutil

    from recipes import RECIPES_DIR
    from recipes.checks.cpu import fitted_prompt_tokens, size_overrides, synthesize
    from recipes.checks.models import tiny_base
    from recipes.checks.table import STAGES

    require_pack("msmarco-v2-passage/dl21")
    stage = STAGES["rearank"]
    os.environ.setdefault("REARANK_DATA", str(data_root()))
    data = synthesize(stage, tmp_path / "data", tmp_path / "synth.log")
    log = tmp_path / "verl.log"
    env = {**os.environ, "VERL_PLATFORM": "cpu", "OMP_NUM_THREADS": "1", "REARANK_ROLLOUT_WATCH_S": "2",
           "VERL_FILE_LOGGER_PATH": str(tmp_path / "verl.jsonl"),  # else verl writes ./<project>/<experiment>.jsonl
           "RAY_DEDUP_LOGS": "0"}
    cmd = [sys.executable, "-m", "verl.trainer.main_ppo", "--config-dir", str(RECIPES_DIR / "rearank"),
           "--config-name", "grpo",
           *size_overrides(stage, data, tiny_base(), tmp_path / "ckpt", 50,
                           prompt_tokens=fitted_prompt_tokens(stage, data, tiny_base())),
           "trainer.save_freq=-1"]
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        servers, deadline = [], time.monotonic() + 1800
        while not servers:  # the server's own start-up line, then its process among the run's descendants
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(1)
            if "transformers rollout server 0:" in log.read_text(errors="replace"):
                servers = [p for p in psutil.Process(proc.pid).children(recursive=True)
                           if "TransformersServer" in " ".join(p.cmdline())]
        for server in servers:
            server.kill()
        code = proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text(errors="replace")
    assert code != 0
    assert "rearank: the rollout server transformers_server_0 died (" in text, text[-3000:]
