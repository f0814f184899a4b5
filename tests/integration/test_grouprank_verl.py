"""verl 0.9.1 scores groupwise completions: the project's GRPO recipe with its reward pointed at the groupwise
reward (custom_reward_function path/name/reward_kwargs), a DataProto of tokenized completions, and verl's
reward loop worker with the naive reward manager (through ``recipes.checks.check.score_with_verl``)."""

import json

import numpy as np
import pytest

from tests.conftest import require

torch = require("torch")
require("verl", "the `train` extra")
require("hydra", "the `train` extra")

from transformers import AutoTokenizer
from verl import DataProto

import rearank.methods.groupwise.reward as group_reward
from rearank.backends.models import embedded_model_path
from rearank.methods.groupwise.parser import format_scores, label_scores
from recipes.checks.check import compose_recipe, score_with_verl

LABELS = [2, 0, 3, 0, 1, 0]
COMPLETIONS = [
    f"<reason>[3] answers it, [1] partly.</reason>\n<answer>{format_scores(label_scores(LABELS, 3))}</answer>",
    '<reason>unsure</reason>\n<answer>{"[1]": 9, "[2]": 8, "[3]": 1, "[4]": 0, "[5]": 2, "[6]": 0}</answer>',
    "<reason>I will rank them</reason>\n<answer>[3] > [1] > [5]</answer>",
    '{"[1]": 5, "[2]": 0}',
]
REWARD_KWARGS = {"max_label": 3, "rbo_p": 0.8, "recall_weight": 0.3}


def groupwise_config(model_dir, path):
    """The GRPO recipe with the groupwise reward: its listwise reward_kwargs replaced, not merged."""
    kwargs = ",".join(f"{key}:{value}" for key, value in REWARD_KWARGS.items())
    return compose_recipe("rearank/grpo", [
        f"actor_rollout_ref.model.path={model_dir}",
        f"reward.custom_reward_function.path={path}",
        "~reward.custom_reward_function.reward_kwargs",
        f"+reward.custom_reward_function.reward_kwargs={{{kwargs}}}",
    ])


def batch(tokenizer, completions, ground_truth):
    """A rollout batch laid out as verl's trainer hands it over: left-padded prompts, right-padded responses."""
    prompt_ids = tokenizer.apply_chat_template([{"role": "user", "content": "Score the documents."}],
                                               add_generation_prompt=True, tokenize=True)
    if not isinstance(prompt_ids, list):  # transformers 5 may return an encoding
        prompt_ids = prompt_ids["input_ids"]
    responses = [tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id] for text in completions]
    n, plen, rlen = len(completions), len(prompt_ids), max(map(len, responses))
    response_ids = torch.full((n, rlen), tokenizer.pad_token_id)
    mask = torch.zeros((n, plen + rlen), dtype=torch.long)
    mask[:, :plen] = 1
    for i, ids in enumerate(responses):
        response_ids[i, : len(ids)] = torch.tensor(ids)
        mask[i, plen: plen + len(ids)] = 1
    prompts = torch.tensor([prompt_ids] * n)
    return DataProto.from_dict(
        tensors={"prompts": prompts, "responses": response_ids, "attention_mask": mask},
        non_tensors={
            "data_source": np.array(["rearank/dl21"] * n, dtype=object),
            "reward_model": np.array([{"style": "rule", "ground_truth": ground_truth}] * n, dtype=object),
            "extra_info": np.array([{"index": i} for i in range(n)], dtype=object),
        },
    )


@pytest.fixture(scope="module")
def model_dir():
    return embedded_model_path()


@pytest.mark.parametrize("path", ["pkg://rearank.methods.groupwise.reward", group_reward.__file__])
def test_verl_reward_loop_scores_groupwise_completions(model_dir, path):
    config = groupwise_config(model_dir, path)
    assert dict(config.reward.custom_reward_function.reward_kwargs) == REWARD_KWARGS
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    ground_truth = json.dumps({"labels": LABELS})
    data = batch(tokenizer, COMPLETIONS, ground_truth)

    scores, extras, rm_scores = score_with_verl(config, data)
    expected = [group_reward.compute_score("rearank/dl21", c, ground_truth, **REWARD_KWARGS) for c in COMPLETIONS]
    assert scores == pytest.approx([e["score"] for e in expected])
    assert scores[0] == pytest.approx(0.3 + 0.5 + 0.1 * expected[0]["r_dist"])  # ideal ranking, kwargs applied
    assert 0.0 < scores[1] < scores[0] and scores[2] == 0.0 and scores[3] == -1.0
    assert expected[0] != group_reward.compute_score("rearank/dl21", COMPLETIONS[0], ground_truth)

    # every sample reports the same numeric parts (verl stacks them into arrays for logging)
    assert all(set(e) == set(group_reward.PARTS) for e in extras)
    assert np.array([e["format_tags"] for e in extras]).tolist() == [1.0, 1.0, 1.0, 0.0]

    # the score lands on the last response token, where verl's GRPO advantage reads it
    lengths = data.batch["attention_mask"][:, data.batch["prompts"].shape[1]:].sum(-1)
    for i, length in enumerate(lengths.tolist()):
        assert rm_scores[i, length - 1].item() == pytest.approx(scores[i])
        assert rm_scores[i].abs().sum().item() == pytest.approx(abs(scores[i]))


def test_listwise_reward_kwargs_are_refused(model_dir):
    from verl.trainer.ppo.reward import get_custom_reward_fn

    config = compose_recipe("rearank/grpo", [
        f"actor_rollout_ref.model.path={model_dir}",
        "reward.custom_reward_function.path=pkg://rearank.methods.groupwise.reward"])
    reward_fn = get_custom_reward_fn(config)
    with pytest.raises(ValueError, match="listwise"):
        reward_fn(data_source="d", solution_str="x", ground_truth='{"labels": [1]}')
