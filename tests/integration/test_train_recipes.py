"""``make train RECIPE=<name> DRY_RUN=1`` prints, for every recipe, the command that trains it with the right
config, and every verl recipe file composes and passes verl's validation (no GPU needed)."""

import os
import subprocess

import pytest

from tests.conftest import require

require("verl", "verl is in the `train` extra")
require("hydra", "the `train` extra")

from recipes import RECIPES_DIR
from recipes.checks.check import compose_recipe

ROOT = RECIPES_DIR.parent
#: make train RECIPE=<name> -> the recipe files its commands must name, in order
EXPECTED = {
    "rearank": ["rearank/grpo"], "rearank_debug": ["rearank/grpo_debug"],
    "grouprank": ["grouprank/sft", "grouprank/grpo"], "grouprank_debug": ["grouprank/grpo_debug"],
    "reasonrank": ["reasonrank/sft", "reasonrank/grpo"], "reasonrank_debug": ["reasonrank/grpo_debug"],
    "reasonrank_sft": ["reasonrank/sft"],
    "barrag_selector": ["barrag/selector_grpo"], "barrag_generator_debug": ["barrag/generator_grpo_debug"],
    "arena": ["arena/grpo"], "arena_debug": ["arena/grpo_debug"],
}
VERL_FILES = sorted({f for files in EXPECTED.values() for f in files if not f.endswith("/sft")} | {"barrag/generator_grpo",
                                                                         "barrag/selector_grpo_debug"})


#: the recipes' settings, which a dry run starts without (an earlier test in the process may have set them)
RECIPE_SETTINGS = ("GROUPRANK_SFT_MODEL", "REASONRANK_SFT_MODEL", "BARRAG_READER_URL", "BARRAG_READER_MODEL",
                   "ATTN_IMPL", "REARANK_RL_DATA")


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in RECIPE_SETTINGS}


def dry_run(recipe: str, *args: str) -> str:
    env = {**clean_env(), "DRY_RUN": "1", "RECIPE": recipe}
    return subprocess.run([str(RECIPES_DIR / "train.sh"), *args], env=env, capture_output=True, text=True,
                          check=True, cwd=ROOT).stdout


@pytest.mark.parametrize("recipe", sorted(EXPECTED))
def test_dry_run_names_the_recipe_files(recipe):
    lines = dry_run(recipe, "trainer.total_training_steps=5").splitlines()
    assert len(lines) == len(EXPECTED[recipe])
    for line, file in zip(lines, EXPECTED[recipe], strict=True):
        folder, name = file.split("/")
        assert f"'--config-dir' '{RECIPES_DIR / folder}' '--config-name' '{name}'" in line
        if name == "sft":  # the cold start: verl's SFT trainer under torchrun; the overrides go to GRPO
            assert "'-m' 'verl.trainer.sft_trainer'" in line and f"dl21-{folder}/sft_train.parquet" in line
            assert ("'trainer.total_training_steps=5'" in line) == recipe.endswith("_sft")
            continue
        assert line.startswith("+ ") and "'-m' 'verl.trainer.main_ppo'" in line
        assert "'trainer.total_training_steps=5'" in line and "data.train_files=/" in line


@pytest.mark.parametrize("recipe, suffix", [("barrag", ""), ("barrag_debug", "_debug")])
def test_dry_run_of_barrag_prints_the_loop_with_both_stage_recipes(recipe, suffix):
    """BAR-RAG is a loop (recipes/barrag/loop.py): its dry run lists every stage, both verl recipes included."""
    out = dry_run(recipe)
    for stage in ("selector_grpo", "generator_grpo"):
        assert f"--config-dir {RECIPES_DIR / 'barrag'} --config-name {stage}{suffix}" in out
    assert "recipes.checks.export" in out


def test_make_train_dry_run_for_rrpo_prints_its_own_trainer():
    out = subprocess.run(["make", "-s", "train", "RECIPE=rrpo", "DRY_RUN=1", "ARGS=epochs=1"], capture_output=True,
                         text=True, check=True, cwd=ROOT).stdout
    assert f"'rrpo' 'train' '--config' '{RECIPES_DIR / 'rrpo' / 'hotpotqa.yaml'}' '--set' 'data=/" in out
    assert out.rstrip().endswith("'--set' 'epochs=1'")  # the user's settings last: they win


def test_unknown_recipe_is_one_line_naming_the_choices():
    proc = subprocess.run([str(RECIPES_DIR / "train.sh")], env={**os.environ, "RECIPE": "rearank_grpo"},
                          capture_output=True, text=True, check=False, cwd=ROOT)
    assert proc.returncode == 2 and "unknown RECIPE=rearank_grpo" in proc.stderr and "grouprank" in proc.stderr


@pytest.mark.parametrize("file", VERL_FILES)
def test_every_recipe_file_composes_and_validates(file):
    """verl's own validation of the composed config (LoRA ranks aside, which only vLLM checks)."""
    from omegaconf import open_dict
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    config = compose_recipe(file)
    with open_dict(config):
        config.actor_rollout_ref.model.lora_rank = 0
    validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    assert config.algorithm.adv_estimator == "grpo" and config.trainer.resume_mode == "auto"


def test_grouprank_recipe_trains_with_the_groupwise_reward():
    config = compose_recipe("grouprank/grpo")
    assert config.reward.custom_reward_function.path == "pkg://rearank.methods.groupwise.reward"
    assert config.data.train_files.endswith("dl21-grouprank/train.parquet")  # teacher-labelled rows
    assert config.actor_rollout_ref.model.path == "Qwen/Qwen2.5-7B-Instruct"  # the paper's 7B backbone


def test_reasonrank_recipe_carries_the_papers_grpo_and_sft_values():
    from hydra import compose, initialize_config_dir

    config = compose_recipe("reasonrank/grpo")
    reward = config.reward.custom_reward_function
    assert reward.path == "pkg://rearank.methods.listwise.reasonrank" and reward.reward_kwargs.reasoning is True
    actor, rollout = config.actor_rollout_ref.actor, config.actor_rollout_ref.rollout
    assert (actor.optim.lr, config.data.train_batch_size, actor.ppo_mini_batch_size, rollout.n) == (1e-6, 16, 8, 8)
    assert (actor.use_kl_loss, actor.kl_loss_coef, actor.kl_loss_type) == (True, 0.001, "low_var_kl")
    assert (config.algorithm.use_kl_in_reward, actor.entropy_coeff) == (False, 0)
    assert (config.data.max_prompt_length, config.data.max_response_length) == (20480, 3072)
    assert config.data.train_files.endswith("dl21-reasonrank/train.parquet")
    with initialize_config_dir(config_dir=str(RECIPES_DIR / "reasonrank"), version_base=None):
        sft = compose(config_name="sft", overrides=["hydra.searchpath=[pkg://verl.trainer.config]"])
    assert (sft.optim.lr, sft.optim.lr_scheduler_type, sft.optim.lr_warmup_steps_ratio) == (5e-6, "cosine", 0.1)
    assert (sft.trainer.total_epochs, sft.data.micro_batch_size_per_gpu) == (5, 1)
    assert sft.data.custom_cls.path == "pkg://recipes.grouprank.sft_dataset"


def test_reasonrank_grpo_starts_from_its_sft_checkpoint(tmp_path):
    """The two-stage run exports the SFT stage's last huggingface/ folder as REASONRANK_SFT_MODEL (which grpo.yaml
    reads) before GRPO; with PYTHON a stub that prints, no GPU is needed past the CUDA check, which it also passes."""
    sft = tmp_path / "ckpt" / "sft" / "reasonrank"
    sft.mkdir(parents=True)
    (sft / "latest_checkpointed_iteration.txt").write_text("7")
    data = tmp_path / "data"
    data.mkdir()
    for name in ("train", "val", "sft_train", "sft_val"):
        (data / f"{name}.parquet").write_text("")
    stub = tmp_path / "python"
    stub.write_text('#!/bin/sh\necho "ran $* with REASONRANK_SFT_MODEL=$REASONRANK_SFT_MODEL"\n')
    stub.chmod(0o755)
    env = {**clean_env(), "RECIPE": "reasonrank", "PYTHON": str(stub), "CKPT_ROOT": str(tmp_path / "ckpt"),
           "REARANK_RL_DATA": str(data)}
    out = subprocess.run([str(RECIPES_DIR / "train.sh")], env=env, capture_output=True, text=True, check=True,
                         cwd=ROOT).stdout
    assert f"REASONRANK_SFT_MODEL={sft}/global_step_7/huggingface" in out.splitlines()[-1]
    assert "verl.trainer.main_ppo" in out.splitlines()[-1]


#: every RECIPE= name train.sh accepts
NAMES = sorted(set(EXPECTED) | {"grouprank_sft", "reasonrank_sft", "barrag", "barrag_debug", "barrag_selector_debug",
                                "barrag_generator", "rrpo"})


def run_sh(recipe: str, cwd, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(RECIPES_DIR / "train.sh"), *args], env={**clean_env(), "DRY_RUN": "1", "RECIPE": recipe,
                                                                       **env},
                          capture_output=True, text=True, check=False, cwd=cwd)


@pytest.mark.parametrize("recipe", NAMES)
def test_dry_run_works_from_a_folder_outside_the_checkout(recipe, tmp_path):
    """Every path train.sh prints is absolute; the recipe folders and RRPO's question files exist."""
    from tests.conftest import data_root

    proc = run_sh(recipe, tmp_path, REARANK_DATA=str(data_root()))
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("+ ")]
    assert lines
    for line in lines:
        for word in line.replace("'", " ").replace("=", " ").split():
            if word.endswith((".parquet", ".json", ".yaml")) or "/recipes" in word:
                assert word.startswith("/"), word
            if word.startswith(str(RECIPES_DIR)):
                assert os.path.exists(word), word
    if recipe == "rrpo":
        qa = data_root() / "qa" / "hotpotqa"
        assert f"'data={qa / 'train_distractor.sample100.json'}'" in lines[0]
        assert f"'eval_data={qa / 'dev_distractor.first103.json'}'" in lines[0]
        assert os.path.isfile(qa / "train_distractor.sample100.json")


def test_attention_is_sdpa_without_flash_attn_and_printed(tmp_path):
    proc = run_sh("rearank", tmp_path)
    assert "train.sh: attention sdpa (flash-attn does not import" in proc.stderr
    assert ("'actor_rollout_ref.model.override_config.attn_implementation=sdpa' "
            "'actor_rollout_ref.model.use_remove_padding=false'") in proc.stdout
    flash = run_sh("grouprank_sft", tmp_path, ATTN_IMPL="flash_attention_2")
    assert "train.sh: attention flash_attention_2 (ATTN_IMPL" in flash.stderr
    assert "'model.override_config.attn_implementation=flash_attention_2'" in flash.stdout
    assert "use_remove_padding" not in flash.stdout


@pytest.mark.parametrize("file", VERL_FILES + ["grouprank/sft"])
def test_every_recipe_names_its_attention_implementation(file):
    config = compose_recipe(file) if not file.endswith("sft") else None
    if config is None:
        import yaml

        raw = yaml.safe_load((RECIPES_DIR / f"{file}.yaml").read_text())
        assert raw["model"]["override_config"]["attn_implementation"] == "flash_attention_2"
        return
    assert config.actor_rollout_ref.model.override_config.attn_implementation == "flash_attention_2"


def test_recipe_settings_reach_ray_workers_through_verls_runtime_env(tmp_path):
    """GROUPRANK_SFT_MODEL / BARRAG_READER_URL set in the launching shell become runtime_env env_vars of the verl
    command, which Ray gives every worker on every node; odd characters survive Hydra's parsing."""
    url = "http://10.0.0.1:8000/v1?key='x'"
    proc = run_sh("barrag_selector", tmp_path, BARRAG_READER_URL=url, BARRAG_READER_MODEL="reader")
    words = [w for w in __import__("shlex").split(proc.stdout.splitlines()[0][2:]) if w.startswith("++ray_kwargs")]
    config = compose_recipe("barrag/selector_grpo", words)
    assert dict(config.ray_kwargs.ray_init.runtime_env.env_vars) == {"BARRAG_READER_URL": url,
                                                                       "BARRAG_READER_MODEL": "reader"}
    grouprank = run_sh("grouprank_debug", tmp_path, GROUPRANK_SFT_MODEL="/shared/sft/huggingface")
    assert "'++ray_kwargs.ray_init.runtime_env.env_vars.GROUPRANK_SFT_MODEL='\\''/shared/sft/huggingface'\\'''" in \
        grouprank.stdout
    assert "runtime_env" not in run_sh("grouprank_debug", tmp_path).stdout  # nothing set, nothing passed


def test_grouprank_sft_runs_torchrun_with_the_launchers_nodes(tmp_path):
    proc = run_sh("grouprank_sft", tmp_path, NNODES="2", NODE_RANK="1", MASTER_ADDR="10.0.0.1", GPUS_PER_NODE="4")
    assert proc.returncode == 0, proc.stderr
    assert ("'--nnodes=2' '--node_rank=1' '--master_addr=10.0.0.1' '--master_port=29500' '--nproc_per_node=4'"
            in proc.stdout) and "'trainer.nnodes=2'" in proc.stdout and "--standalone" not in proc.stdout
    missing = run_sh("grouprank_sft", tmp_path, NNODES="2", NODE_RANK="1")
    assert missing.returncode != 0 and "MASTER_ADDR" in missing.stderr.splitlines()[-1]
