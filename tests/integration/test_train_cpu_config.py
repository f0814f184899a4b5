"""``make train-cpu``'s own logic, without running verl: its overrides change only sizes, device, model path and
CPU plumbing of each recipe (composed as verl composes them), and metrics.jsonl is one object per step from
verl's file-logger output, the resumed run's step included; a zero gradient or a NaN loss fails the run."""

import json
import math
from dataclasses import replace

import pytest

from tests.conftest import require

require("verl", "the `train` extra")
require("hydra", "the `train` extra")

from rearank.errors import RearankError
from recipes.checks import cpu
from recipes.checks.check import compose_recipe
from recipes.checks.cpu import Nodes, check_metrics, fitted_prompt_tokens, merge_metrics, size_overrides
from recipes.checks.models import tiny_base
from recipes.checks.table import STAGES

#: What the CPU run must leave as the recipe has it.
KEPT = ("algorithm.adv_estimator", "algorithm.norm_adv_by_std_in_grpo", "actor_rollout_ref.actor.optim.lr",
        "actor_rollout_ref.actor.kl_loss_coef", "actor_rollout_ref.actor.kl_loss_type",
        "actor_rollout_ref.actor.use_kl_loss", "actor_rollout_ref.actor.clip_ratio",
        "actor_rollout_ref.actor.loss_agg_mode", "actor_rollout_ref.model.lora_rank",
        "actor_rollout_ref.rollout.temperature", "reward.custom_reward_function")


def pick(config, dotted):
    for key in dotted.split("."):
        config = config[key]
    return config


@pytest.mark.parametrize("name", sorted(STAGES))
def test_cpu_overrides_keep_the_recipes_algorithm_reward_and_optimiser(name, tmp_path):
    stage = STAGES[name]
    recipe = compose_recipe(stage.recipe)
    cpu = compose_recipe(stage.recipe, size_overrides(stage, tmp_path / "data", tmp_path / "model",
                                                      tmp_path / "ckpt", 2))
    for key in KEPT:
        assert pick(cpu, key) == pick(recipe, key), key
    assert cpu.actor_rollout_ref.rollout.name == "transformers" and cpu.trainer.device == "cpu"
    assert cpu.trainer.total_training_steps == 2 and cpu.trainer.resume_mode == "auto"
    env_vars = cpu.ray_kwargs.ray_init.runtime_env.env_vars
    assert env_vars.VERL_PLATFORM == "cpu"  # every Ray worker, on every node
    if name == "grouprank":  # the recipe's own ${oc.env:GROUPRANK_SFT_MODEL}, given to the workers
        assert env_vars.GROUPRANK_SFT_MODEL == str(tmp_path / "model")
        from omegaconf import OmegaConf

        raw = OmegaConf.to_container(cpu.actor_rollout_ref.model, resolve=False)
        assert raw["path"].startswith("${oc.env:GROUPRANK_SFT_MODEL,")
    else:
        assert cpu.actor_rollout_ref.model.path == str(tmp_path / "model")
    assert cpu.trainer.default_local_dir == str(tmp_path / "ckpt")
    assert cpu.actor_rollout_ref.model.lora.merge == (recipe.actor_rollout_ref.model.lora_rank > 0)


def test_cpu_overrides_on_a_running_cluster_declare_no_ray_resources(tmp_path):
    stage = STAGES["rearank"]
    overrides = size_overrides(stage, tmp_path, tmp_path / "model", tmp_path / "ckpt", 2, nnodes=2,
                               joins_cluster=True, env={"OMP_NUM_THREADS": "1"})
    cpu = compose_recipe(stage.recipe, overrides)
    assert cpu.trainer.nnodes == 2 and cpu.trainer.n_gpus_per_node == 1
    assert cpu.ray_kwargs.ray_init.num_cpus is None and "num_gpus" not in cpu.ray_kwargs.ray_init
    assert dict(cpu.ray_kwargs.ray_init.runtime_env.env_vars) == {"VERL_PLATFORM": "cpu", "OMP_NUM_THREADS": "1"}


def write_log(path, steps):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"step": s, "data": data}) + "\n" for s, data in steps))


def step(n, loss=0.1, norm=0.5):
    return n, {"training/global_step": n, "actor/pg_loss": loss, "actor/grad_norm": norm, "critic/score/mean": 0.2}


def test_metrics_merge_both_runs_one_object_per_step(tmp_path):
    write_log(tmp_path / "logs" / "verl.1.jsonl", [step(1), step(2), (2, {"val-core/x/reward/mean@1": 0.5})])
    write_log(tmp_path / "logs" / "verl.2.jsonl", [step(3)])
    rows = merge_metrics(tmp_path)
    check_metrics(rows, tmp_path)
    written = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert written == rows and [r["training/global_step"] for r in rows] == [1, 2, 3]


@pytest.mark.parametrize("bad", [step(2, loss=math.nan), step(2, norm=0.0), step(2, norm=None)])
def test_a_step_without_a_real_update_fails_the_run(tmp_path, bad):
    write_log(tmp_path / "logs" / "verl.1.jsonl", [step(1), bad, step(3)])
    with pytest.raises(RearankError, match="step 2"):
        check_metrics(merge_metrics(tmp_path), tmp_path)


def test_fewer_than_three_steps_fails_the_run(tmp_path):
    write_log(tmp_path / "logs" / "verl.1.jsonl", [step(1), step(2)])
    with pytest.raises(RearankError, match="2 steps logged, expected 3"):
        check_metrics(merge_metrics(tmp_path), tmp_path)


def test_prompts_are_padded_to_the_longest_row_not_the_stages_ceiling(tmp_path):
    """verl pads every prompt to data.max_prompt_length: the CPU run asks for the longest prompt of its rows (chat
    template applied, rounded up to 64 tokens), never more than the stage allows, and the overrides carry it."""
    import pandas as pd
    from transformers import AutoTokenizer

    model = tiny_base()
    tokenizer = AutoTokenizer.from_pretrained(model)
    rows = {"train.parquet": ["word " * 10, "word " * 300], "val.parquet": ["word " * 500]}
    for name, texts in rows.items():
        pd.DataFrame({"prompt": [[{"role": "user", "content": t}] for t in texts]}).to_parquet(tmp_path / name)
    longest = len(tokenizer.apply_chat_template([{"role": "user", "content": "word " * 500}],
                                                add_generation_prompt=True, tokenize=True,
                                                return_dict=True)["input_ids"])
    stage = STAGES["rearank"]
    fitted = fitted_prompt_tokens(stage, tmp_path, model)
    assert fitted % 64 == 0 and longest <= fitted < longest + 64 < stage.prompt_tokens
    overrides = size_overrides(stage, tmp_path, model, tmp_path / "ckpt", 2, prompt_tokens=fitted)
    assert f"data.max_prompt_length={fitted}" in overrides
    assert f"actor_rollout_ref.actor.ppo_max_token_len_per_gpu={fitted + stage.response_tokens}" in overrides
    assert fitted_prompt_tokens(replace(stage, prompt_tokens=256), tmp_path, model) == 256  # the ceiling: verl drops what is longer


def test_a_run_starts_a_ray_of_its_own_unless_given_a_cluster(tmp_path, monkeypatch):
    """Another run's cluster on the machine (here: RAY_ADDRESS set) is not joined; --ray-address is."""
    envs = []
    monkeypatch.setattr(cpu, "fitted_prompt_tokens", lambda *args: 64)
    monkeypatch.setattr(cpu, "size_overrides", lambda *args: [])
    monkeypatch.setattr(cpu, "_run", lambda cmd, log, env: envs.append(env["RAY_ADDRESS"]) or 1.0)
    monkeypatch.setenv("RAY_ADDRESS", "auto")
    stage = STAGES["rearank"]
    cpu.train(stage, tmp_path, tmp_path / "tiny-model", tmp_path / "run", 1)
    cpu.train(stage, tmp_path, tmp_path / "tiny-model", tmp_path / "run", 1, Nodes(2, "10.0.0.1:6379"))
    assert envs == ["local", "10.0.0.1:6379"]
