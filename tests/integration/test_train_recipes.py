"""``make train RECIPE=<name> DRY_RUN=1`` prints, for every recipe, the command that trains it with the right
config, and every verl recipe file composes and passes verl's validation (no GPU needed)."""

import os
import subprocess

import pytest

from tests.conftest import require

require("verl", "verl is in the `train` extra")
require("hydra", "the `train` extra")

from recipes import RECIPES_DIR
from recipes.train_check import compose_recipe

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


def dry_run(recipe: str, *args: str) -> str:
    env = {**os.environ, "DRY_RUN": "1", "RECIPE": recipe}
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
    assert "recipes.export" in out


def test_make_train_dry_run_for_rrpo_prints_its_own_trainer():
    out = subprocess.run(["make", "-s", "train", "RECIPE=rrpo", "DRY_RUN=1", "ARGS=epochs=1"], capture_output=True,
                         text=True, check=True, cwd=ROOT).stdout
    assert f"'rrpo' 'train' '--config' '{RECIPES_DIR / 'rrpo' / 'hotpotqa.yaml'}' '--set' 'epochs=1'" in out


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
    assert config.reward.custom_reward_function.path == "pkg://rearank.grouprank.reward"
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
    env = {**os.environ, "RECIPE": "reasonrank", "PYTHON": str(stub), "CKPT_ROOT": str(tmp_path / "ckpt"),
           "REARANK_RL_DATA": str(data)}
    out = subprocess.run([str(RECIPES_DIR / "train.sh")], env=env, capture_output=True, text=True, check=True,
                         cwd=ROOT).stdout
    assert f"REASONRANK_SFT_MODEL={sft}/global_step_7/huggingface" in out.splitlines()[-1]
    assert "verl.trainer.main_ppo" in out.splitlines()[-1]
