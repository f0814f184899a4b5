"""The verl GRPO recipe against the installed verl on CPU: config, dataset, reward manager, GRPO advantage."""

import os
import subprocess

import pytest

from tests.conftest import require

require("verl", "verl is in the `train` extra")

from recipes import RECIPES_DIR
from recipes.checks.check import check_config, compose_recipe, run_checks
from recipes.checks.data import synthesize_small
from tests.conftest import data_root, require_pack


@pytest.fixture(scope="module")
def rl_data(tmp_path_factory):
    require_pack("msmarco-v2-passage/dl21")
    os.environ.setdefault("REARANK_DATA", str(data_root()))  # rearank.data.packs reads the packs from there
    return synthesize_small(tmp_path_factory.mktemp("rl"), samples_per_query=1)


def test_recipe_checks_pass_end_to_end(rl_data):
    from rearank.backends.models import embedded_model_path

    lines = run_checks(rl_data, embedded_model_path(), n_rows=2)
    report = "\n".join(lines)
    assert report.count("[ok]") == 5, report
    assert "128 prompts x 32 rollouts per step" in report and "1 GPU(s)" in report
    # the released launch script's values (issue 10, item 4), as verl composed them from the recipe
    assert ("mini-batch 8 (16 updates/step), KL 0.01 (low_var_kl), lr 1e-06 constant, 160 steps, "
            "prompt 3072 + response 2048 tokens") in report, report
    for kind in ("ideal", "presented", "reversed", "garbage"):
        assert f"  {kind}" in report


def test_bad_reward_option_is_caught_before_training():
    config = compose_recipe("rearank/grpo", ["reward.custom_reward_function.reward_kwargs.rank_reward=ndcg"])
    with pytest.raises(ValueError, match="rank_reward must be one of"):
        check_config(config)


def test_verl_validation_runs_on_the_recipe():
    config = compose_recipe("rearank/grpo", ["actor_rollout_ref.actor.use_dynamic_bsz=false"])
    with pytest.raises(Exception, match="ppo_micro_batch_size"):  # verl: fixed micro-batches need a size
        check_config(config)


def test_train_sh_prints_the_command_and_refuses_without_gpu(rl_data):
    env = {**os.environ, "REARANK_RL_DATA": str(rl_data), "DRY_RUN": "1"}
    out = subprocess.run([str(RECIPES_DIR / "train.sh"), "trainer.total_training_steps=5"], env=env,
                         capture_output=True, text=True, check=True).stdout
    assert "-m' 'verl.trainer.main_ppo' '--config-dir'" in out and f"data.train_files={rl_data}/train.parquet" in out
    assert "trainer.total_training_steps=5" in out
    env.pop("DRY_RUN")
    proc = subprocess.run([str(RECIPES_DIR / "train.sh")], env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and "no CUDA GPU" in proc.stderr
