"""``make train`` on several nodes without a cluster: the launcher's dry runs (each node's torchrun command with its
rank, the GRPO command), the Slurm script against a fake ``srun``/``scontrol`` that records its calls, and a setting
with a space handed by train.sh to a real Ray worker. tests/slow/test_train_cpu.py runs it on two nodes."""

from __future__ import annotations

import os
import re
import shlex
import stat
import subprocess
from pathlib import Path

import pytest

from tests.conftest import require

require("ray", "the `train` extra")
require("hydra", "the `train` extra")
require("verl", "the `train` extra")

from rearank.errors import RearankError
from recipes import RECIPES_DIR
from recipes.checks.check import compose_recipe
from recipes.checks.cpu_launch import launch_overrides
from recipes.checks.models import tiny_base

ROOT = RECIPES_DIR.parent
#: the launcher's own settings, which each test starts without
SETTINGS = ("GROUPRANK_SFT_MODEL", "REARANK_RL_DATA", "ATTN_IMPL", "NNODES", "NODE_RANK", "MASTER_ADDR", "HEAD_ADDR",
            "GPUS_PER_NODE", "STAGE", "RAY_ADDRESS", "TRAIN_DEVICE", "DRY_RUN", "PYTHON")

#: srun: records its options and command, then runs the command once per node it was given (SLURM_NODEID set), as
#: Slurm's one task a node does; scontrol: `scontrol show hostnames LIST` names two hosts.
FAKE_SRUN = """#!/usr/bin/env bash
printf '%s\\n' "srun $*" >>"$FAKE_LOG"
nodes=1
while [[ $# -gt 0 && "$1" == -* ]]; do [[ "$1" == --nodes=* ]] && nodes=${1#--nodes=}; shift; done
for ((i = 0; i < nodes; i++)); do SLURM_NODEID=$i SLURM_PROCID=$i "$@" || exit; done
"""
FAKE_SCONTROL = """#!/usr/bin/env bash
printf '%s\\n' "scontrol $*" >>"$FAKE_LOG"
[[ "$1 $2" == "show hostnames" ]] && printf 'gpu-a\\ngpu-b\\n'
"""


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SETTINGS and not k.startswith("SLURM_")}
    return {**env, **extra}


def commands(stdout: str) -> list[list[str]]:
    return [shlex.split(line[2:]) for line in stdout.splitlines() if line.startswith("+ ")]


def option(argv: list[str], name: str) -> str:
    return next(word.split("=", 1)[1] for word in argv if word.startswith(f"{name}="))


def test_make_train_dry_run_on_two_nodes_prints_each_nodes_sft_command_then_grpo(tmp_path):
    proc = subprocess.run(["make", "-s", "train", "RECIPE=grouprank", "NNODES=2", "DRY_RUN=1", "ARGS=trainer.total_epochs=1"],
                          capture_output=True, text=True, check=False, cwd=ROOT,
                          env=clean_env(HEAD_ADDR="127.0.0.1", GPUS_PER_NODE="4"))
    assert proc.returncode == 0, proc.stderr
    sft0, sft1, grpo = commands(proc.stdout)
    for rank, sft in enumerate((sft0, sft1)):
        assert sft[1:3] == ["-m", "torch.distributed.run"] and "verl.trainer.sft_trainer" in sft
        assert (option(sft, "--nnodes"), option(sft, "--node_rank"), option(sft, "--master_addr")) == (
            "2", str(rank), "127.0.0.1")
        assert option(sft, "--nproc_per_node") == "4" and "trainer.n_gpus_per_node=4" in sft
        assert "trainer.total_epochs=1" not in sft  # the overrides go to GRPO
    assert "verl.trainer.main_ppo" in grpo and grpo[grpo.index("--config-name") + 1] == "grpo"
    assert {"trainer.nnodes=2", "trainer.n_gpus_per_node=4", "trainer.total_epochs=1"} <= set(grpo)
    assert sft0[0] == grpo[0] == str(ROOT / ".venv" / "bin" / "python")  # make setup-gpu's environment
    assert "launch.sh: head 127.0.0.1 = 127.0.0.1, interface lo (HEAD_ADDR)" in proc.stderr


def test_rrpo_on_two_nodes_runs_its_own_trainer_under_torchrun_on_each():
    """RRPO scales with torchrun's ranks (rearank/rag/rrpo/distributed.py), not with verl's trainer.nnodes."""
    proc = subprocess.run(["make", "-s", "train", "RECIPE=rrpo", "NNODES=2", "DRY_RUN=1", "ARGS=epochs=1"],
                          capture_output=True, text=True, check=False, cwd=ROOT,
                          env=clean_env(HEAD_ADDR="127.0.0.1", GPUS_PER_NODE="2"))
    assert proc.returncode == 0, proc.stderr
    runs = commands(proc.stdout)
    assert [option(argv, "--node_rank") for argv in runs] == ["0", "1"]
    for argv in runs:
        assert argv[1:3] == ["-m", "torch.distributed.run"] and option(argv, "--nproc_per_node") == "2"
        assert argv[argv.index("rearank") - 1:argv.index("rearank") + 4] == ["-m", "rearank", "rag", "rrpo", "train"]
        assert argv[-2:] == ["--set", "epochs=1"] and not [w for w in argv if "nnodes=" in w and "trainer" in w]


def test_a_torchrun_stage_on_several_nodes_needs_this_nodes_rank(tmp_path):
    proc = subprocess.run([str(RECIPES_DIR / "train.sh")], capture_output=True, text=True, check=False, cwd=tmp_path,
                          env=clean_env(RECIPE="grouprank", NNODES="2", MASTER_ADDR="10.0.0.1"))
    assert proc.returncode == 2
    assert "set NODE_RANK (0..1) and MASTER_ADDR on each" in proc.stderr.splitlines()[-1]


def test_slurm_script_starts_every_stage_on_every_node_and_ray_with_block(tmp_path):
    """The sbatch script under a fake Slurm: the SFT stage as one srun task a node, each with its SLURM_NODEID as
    torchrun's node rank and the allocation's first host as master; a Ray head on that host and a worker on the
    other, both `--block` (Slurm ends the daemons with the step otherwise); GRPO on 2 nodes of 4 GPUs."""
    bin_dir, log = tmp_path / "bin", tmp_path / "slurm.log"
    bin_dir.mkdir()
    for name, text in (("srun", FAKE_SRUN), ("scontrol", FAKE_SCONTROL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(stat.S_IRWXU)
    env = clean_env(PATH=f"{bin_dir}:{os.environ['PATH']}", FAKE_LOG=str(log), RECIPE="grouprank", DRY_RUN="1",
                    SLURM_JOB_ID="7", SLURM_JOB_NUM_NODES="2", SLURM_JOB_NODELIST="gpu-[a-b]",
                    SLURM_GPUS_ON_NODE="4", SLURM_SUBMIT_DIR=str(ROOT), GROUPRANK_SFT_MODEL="/shared/sft model")
    proc = subprocess.run(["bash", str(RECIPES_DIR / "slurm" / "train.sbatch"), "trainer.total_epochs=1"],
                          capture_output=True, text=True, check=False, cwd=tmp_path, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    calls = log.read_text().splitlines()
    assert "scontrol show hostnames gpu-[a-b]" in calls
    sruns = [c for c in calls if c.startswith("srun ")]
    assert len(sruns) == 3, sruns
    assert sruns[0].startswith("srun --nodes=2 --ntasks=2 --ntasks-per-node=1 ") and "STAGE=torchrun" in sruns[0]
    head = next(c for c in sruns if c.endswith("launch.sh head --block"))
    worker = next(c for c in sruns if c.endswith("launch.sh worker --block"))
    assert "--nodes=1 --ntasks=1 --nodelist=gpu-a " in head and "--nodes=1 --ntasks=1 --ntasks-per-node=1 " \
        "--exclude=gpu-a " in worker
    runs = commands(proc.stdout)
    sft = [argv for argv in runs if "verl.trainer.sft_trainer" in argv]
    assert [(option(a, "--node_rank"), option(a, "--master_addr"), option(a, "--nproc_per_node")) for a in sft] == [
        ("0", "gpu-a", "4"), ("1", "gpu-a", "4")]
    (grpo,) = [argv for argv in runs if "verl.trainer.main_ppo" in argv]
    assert {"trainer.nnodes=2", "trainer.n_gpus_per_node=4", "trainer.total_epochs=1"} <= set(grpo)
    ray = [shlex.split(line[2:]) for line in proc.stderr.splitlines() if "ray.scripts.scripts" in line]
    assert [argv[3:] for argv in ray] == [  # in this order: the workers join a head that is up
        ["start", "--head", "--node-ip-address=gpu-a", "--port=6379", "--num-gpus=4", "--block"],
        ["start", "--address=gpu-a:6379", "--num-gpus=4", "--block"]]
    assert "launch.sh: head gpu-a = gpu-a, interface unknown (first host of SLURM_JOB_NODELIST=gpu-[a-b])" \
        in proc.stderr
    assert re.search(r"launch\.sh: Ray worker on \S+, python " + re.escape(str(ROOT / ".venv/bin/python")),
                     proc.stderr)


def test_a_setting_with_spaces_reaches_a_ray_worker_intact(tmp_path):
    """GROUPRANK_SFT_MODEL with spaces and a quote: train.sh's runtime_env override, parsed by Hydra as verl's
    main_ppo parses it, is the runtime_env a real Ray worker starts with."""
    import ray
    from omegaconf import OmegaConf

    value = "/shared/sft runs/it's here"
    proc = subprocess.run([str(RECIPES_DIR / "train.sh")], capture_output=True, text=True, check=True, cwd=tmp_path,
                          env=clean_env(RECIPE="grouprank_debug", DRY_RUN="1", GROUPRANK_SFT_MODEL=value))
    (argv,) = commands(proc.stdout)
    words = [w for w in argv if w.startswith("++ray_kwargs")]
    runtime_env = OmegaConf.to_container(compose_recipe("grouprank/grpo_debug", words).ray_kwargs.ray_init.runtime_env)
    assert runtime_env["env_vars"]["GROUPRANK_SFT_MODEL"] == value
    ray.init(address="local", num_cpus=1, include_dashboard=False, logging_level="WARNING", log_to_driver=False,
             runtime_env=runtime_env)
    try:
        seen = ray.get(ray.remote(lambda: os.environ.get("GROUPRANK_SFT_MODEL")).remote())
    finally:
        ray.shutdown()
    assert seen == value


@pytest.mark.parametrize("stage, kind", [("rearank", "ray"), ("grouprank_sft", "torchrun"), ("rrpo", "torchrun")])
def test_train_sh_names_each_stage_and_where_it_runs(stage, kind):
    out = subprocess.run([str(RECIPES_DIR / "train.sh"), "--stages"], capture_output=True, text=True, check=True,
                         env=clean_env(RECIPE=stage)).stdout
    assert out.split()[1] == kind
    assert Path(RECIPES_DIR / f"{out.split()[0]}.yaml").is_file()


def test_cpu_mode_runs_the_recipe_with_the_cpu_runs_overrides_and_the_users_win(tmp_path):
    """TRAIN_DEVICE=cpu: train.sh's command composes (no key given twice) into the CPU run, its overrides last."""
    proc = subprocess.run([str(RECIPES_DIR / "train.sh"), "trainer.total_training_steps=5", "trainer.logger=[console]"],
                          capture_output=True, text=True, check=False, cwd=tmp_path,
                          env=clean_env(RECIPE="rearank_debug", DRY_RUN="1", TRAIN_DEVICE="cpu",
                                        REARANK_RL_DATA=str(tmp_path)))
    assert proc.returncode == 0, proc.stderr
    (argv,) = commands(proc.stdout)
    config = compose_recipe("rearank/grpo_debug", argv[argv.index("--config-name") + 2:])
    assert config.trainer.device == "cpu" and config.actor_rollout_ref.rollout.name == "transformers"
    assert config.trainer.total_training_steps == 5 and list(config.trainer.logger) == ["console"]
    assert config.trainer.n_gpus_per_node == 1 and config.ray_kwargs.ray_init.num_gpus == 1
    assert config.actor_rollout_ref.model.path == str(tiny_base())
    assert config.ray_kwargs.ray_init.runtime_env.env_vars.VERL_PLATFORM == "cpu"


def test_cpu_mode_grpo_after_sft_sets_no_model_and_joins_the_cluster(tmp_path):
    words = launch_overrides("grouprank/grpo", tmp_path, nnodes=2, joins_cluster=True, from_sft=True)
    assert not [w for w in words if "model.path=" in w] and not [w for w in words if "ray_init.num_" in w]
    sft = launch_overrides("grouprank/sft", tmp_path, user=["trainer.total_training_steps=3"])
    assert f"model.path={tiny_base()}" in sft and "trainer.total_training_steps=3" in sft
    assert "trainer.total_training_steps=1" not in sft
    with pytest.raises(RearankError, match="no CPU configuration for recipes/rrpo/hotpotqa.yaml"):
        launch_overrides("rrpo/hotpotqa", tmp_path)
