"""``make train-cpu`` for each verl recipe: the real ``verl.trainer.main_ppo`` on CPU (plugin recipes.verl_cpu) for 2
steps, a resumed run for a 3rd, verl's checkpoints, the export, and the exported model at work on two items."""

import json
import math
import os
import shutil
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT, data_root, require, require_pack

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


def free_ports(count):
    """Ports free now on this machine (bound together, so distinct)."""
    import socket

    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


def ray_processes(temp, wait_s=30):
    """Command lines of the processes still running whose command line names the Ray temp folder ``temp``, after
    up to ``wait_s`` seconds for them to end."""
    import psutil

    deadline = time.monotonic() + wait_s
    while True:
        left = []
        for proc in psutil.process_iter(["cmdline"]):
            line = " ".join(proc.info["cmdline"] or [])
            if temp in line:
                left.append(line[:200])
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(1)


def grouprank_labels(out):
    """Small GroupRank data (GRPO rows and SFT rows) from dl21 with oracle teachers; the second run is BM25's
    reversed (a stand-in retriever: this test needs rows, not a good hybrid)."""
    pack = require_pack("msmarco-v2-passage/dl21")
    second = out.parent / "second.trec"
    lines = (pack / "run.bm25.top100.trec").read_text().splitlines()
    second.write_text("".join(f"{q} Q0 {d} {r} {-float(s)} reversed\n" for q, _, d, r, s, _ in map(str.split, lines)))
    done = subprocess.run(
        [sys.executable, "-m", "rearank", "synth", "--labels", "grouprank", "--dataset", "dl21", "--second-run",
         str(second), "--teacher", "oracle", "--max-queries", "4", "--pool-size", "10", "--set-size", "4",
         "--samples-per-query", "2", "--output-dir", str(out), "--tokenizer", "none", "--quiet"],
        capture_output=True, text=True, check=False, env={**os.environ, "REARANK_DATA": str(data_root())})
    assert done.returncode == 0, done.stderr
    return out


def test_grouprank_through_the_launcher_on_two_nodes_sft_on_both_then_grpo_from_its_folder(tmp_path):
    """The user's commands on one machine as two nodes: `recipes/launch.sh head --block` and `worker --block` (each
    with its own ports, 8 CPUs and one declared GPU slot), the SFT stage as two torchrun node processes (`STAGE=
    torchrun NODE_RANK=0|1 recipes/launch.sh`, master 127.0.0.1), then GRPO (`STAGE=ray`) on the Ray cluster,
    TRAIN_DEVICE=cpu: one FSDP rank (gloo) on each node, started from the SFT folder, whose path (with a space)
    reaches the workers only through the runtime_env recipes/train.sh builds. Then the same command again resumes
    for a third step, and the export reranks two dl19 queries."""
    import re
    import signal
    import tempfile

    from recipes.checks.cpu import use_export
    from recipes.checks.table import STAGES

    require_pack("msmarco-v2-passage/dl21")
    data = grouprank_labels(tmp_path / "data")
    ckpt = tmp_path / "ckpt root"  # a space in every checkpoint path, the SFT folder GRPO reads included
    gcs, master, agent, agent2, client, dashboard = free_ports(6)
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths have a length limit
    env = {**os.environ, "REARANK_DATA": str(data_root()), "RECIPE": "grouprank", "TRAIN_DEVICE": "cpu",
           "NNODES": "2", "HEAD_ADDR": "127.0.0.1", "RAY_PORT": str(gcs), "MASTER_PORT": str(master),
           "GPUS_PER_NODE": "1", "REARANK_RL_DATA": str(data), "CKPT_ROOT": str(ckpt), "RAY_DEDUP_LOGS": "0",
           "OMP_NUM_THREADS": "1", "RAY_raylet_start_wait_time_s": "180"}  # Ray's 30 s: short on a busy 2-core VM
    for name in ("GROUPRANK_SFT_MODEL", "RAY_ADDRESS", "NODE_RANK", "STAGE", "PYTHON"):
        env.pop(name, None)
    launch = str(ROOT / "recipes" / "launch.sh")
    node = ["--block", "--num-cpus=8", "--object-store-memory=314572800", "--node-ip-address=127.0.0.1",
            "--min-worker-port=0", "--max-worker-port=0", "--disable-usage-stats"]
    logs = {name: (tmp_path / f"{name}.log").open("w") for name in ("head", "worker", "sft0", "sft1")}
    nodes = [subprocess.Popen([launch, "head", *node, "--include-dashboard=false", f"--temp-dir={temp}",
                               f"--dashboard-agent-listen-port={agent}", f"--ray-client-server-port={client}",
                               f"--dashboard-port={dashboard}"],
                              env=env, stdout=logs["head"], stderr=subprocess.STDOUT)]
    try:
        up = subprocess.run([launch, "wait"], env={**env, "NNODES": "1", "RAY_WAIT_S": "300"}, capture_output=True,
                            text=True, check=False, timeout=600)  # the head, before the worker joins it
        assert up.returncode == 0, up.stderr[-2000:] + (tmp_path / "head.log").read_text()[-3000:]
        nodes.append(subprocess.Popen([launch, "worker", *node, f"--dashboard-agent-listen-port={agent2}"], env=env,
                                      stdout=logs["worker"], stderr=subprocess.STDOUT))
        sft = [subprocess.Popen([launch, "train"], env={**env, "STAGE": "torchrun", "NODE_RANK": str(rank)},
                                cwd=tmp_path, stdout=logs[f"sft{rank}"], stderr=subprocess.STDOUT) for rank in (0, 1)]
        for proc in sft:
            proc.wait(timeout=1800)
        for rank, proc in enumerate(sft):
            assert proc.returncode == 0, (tmp_path / f"sft{rank}.log").read_text()[-3000:]
        grpo, resumed = (subprocess.run([launch, "train", "trainer.logger=[console]", *more],
                                        env={**env, "STAGE": "ray"}, cwd=tmp_path, capture_output=True, text=True,
                                        check=False, timeout=3600)
                         for more in ([], ["trainer.total_training_steps=3"]))  # the rerun resumes (resume_mode auto)
    finally:
        for proc in reversed(nodes):  # `ray start --block` ends its node's processes on SIGTERM, only those
            proc.send_signal(signal.SIGTERM)
        for proc in nodes:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
        left = ray_processes(temp)
        shutil.rmtree(temp, ignore_errors=True)
    assert not left, left  # the nodes' raylets, GCS and workers ended with their `ray start`
    sft_logs = [(tmp_path / f"sft{rank}.log").read_text(errors="replace") for rank in (0, 1)]
    for rank, text in enumerate(sft_logs):
        assert f"'--nnodes=2' '--node_rank={rank}' '--master_addr=127.0.0.1' '--master_port={master}'" in text
    assert re.search(r"step:1 - .*train/loss:[\d.]+", "".join(sft_logs)), sft_logs[0][-3000:]
    log = grpo.stdout + grpo.stderr
    assert grpo.returncode == 0, log[-5000:]
    sft_model = ckpt / "sft" / "grouprank" / "global_step_1" / "huggingface"
    assert f"+ GROUPRANK_SFT_MODEL={sft_model}" in log
    # the recipe's ${oc.env:GROUPRANK_SFT_MODEL,Qwen/...} resolved to the SFT folder on the workers
    assert f"transformers rollout server 0: {sft_model} on" in log
    ranks = dict(re.findall(r"transformers rollout adapter: rank (\d+), replica \d+, node (\w+)", log))
    assert sorted(ranks) == ["0", "1"] and len(set(ranks.values())) == 2, ranks  # one FSDP rank a node
    assert re.search(r"launch\.sh: 2 Ray nodes up", log)
    losses = dict(re.findall(r"step:(\d+) - .*?actor/pg_loss:(-?[\d.e+-]+)", log))
    assert sorted(losses) == ["1", "2"] and all(math.isfinite(float(v)) for v in losses.values()), log[-3000:]
    run = ckpt / "rearank-grouprank" / "qwen2.5-7b-grpo"
    assert (run / "global_step_2" / "actor").is_dir()
    again = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, again[-5000:]
    assert f"Resuming from {run / 'global_step_2'}, setting global step to 2" in again
    assert (run / "global_step_3" / "actor").is_dir()
    # the export (verl's FSDP merger) at work: the groupwise method reranks two dl19 queries with it
    export = tmp_path / "export"
    done = subprocess.run([sys.executable, "-m", "recipes.checks.export", str(run), "--output-dir", str(export)],
                          capture_output=True, text=True, check=False, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    require_pack("msmarco-v1-passage/dl19")
    use = use_export(STAGES["grouprank"], export, tmp_path)
    done = subprocess.run(use, capture_output=True, text=True, check=False, timeout=1200,
                          env={**os.environ, "REARANK_DATA": str(data_root())})
    assert done.returncode == 0, done.stderr[-3000:]
    lines = (tmp_path / "use" / "run.trec").read_text().splitlines()
    assert len({line.split()[0] for line in lines}) == 2 and len(lines) >= 20  # two dl19 queries, reranked


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
