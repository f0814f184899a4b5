"""verl 0.9.1's reward path calls the groupwise reward: custom_reward_function path/name/reward_kwargs, a
DataProto of tokenized completions, the naive reward manager inside verl's RewardLoopWorker."""

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
verl = pytest.importorskip("verl")

from omegaconf import OmegaConf
from transformers import AutoTokenizer
from verl import DataProto
from verl.experimental.reward_loop.reward_loop import RewardLoopWorker, migrate_legacy_reward_impl
from verl.trainer.ppo.reward import resolve_reward_manager_cls

import rearank.grouprank.reward as group_reward
from rearank.grouprank.parser import format_scores, label_scores
from rearank.models import embedded_model_path

LABELS = [2, 0, 3, 0, 1, 0]
COMPLETIONS = [
    f"<reason>[3] answers it, [1] partly.</reason>\n<answer>{format_scores(label_scores(LABELS, 3))}</answer>",
    '<reason>unsure</reason>\n<answer>{"[1]": 9, "[2]": 8, "[3]": 1, "[4]": 0, "[5]": 2, "[6]": 0}</answer>',
    "<reason>I will rank them</reason>\n<answer>[3] > [1] > [5]</answer>",
    '{"[1]": 5, "[2]": 0}',
]
REWARD_KWARGS = {"max_label": 3, "rbo_p": 0.8, "recall_weight": 0.3}


@pytest.fixture(scope="module")
def tokenizer_dir():
    return embedded_model_path()


def verl_config(tokenizer_dir: Path, path: str):
    base = Path(verl.__file__).parent / "trainer" / "config" / "_generated_ppo_trainer.yaml"
    config = OmegaConf.load(base)
    config.actor_rollout_ref.model.path = str(tokenizer_dir)
    config.custom_reward_function = {"path": path, "name": "compute_score", "reward_kwargs": REWARD_KWARGS}
    return migrate_legacy_reward_impl(config)


def batch(tokenizer, completions, ground_truth, prompt_length=16, response_length=160):
    """A rollout batch as verl builds it: left-padded prompts, right-padded responses, one attention mask."""
    n = len(completions)
    prompts = torch.full((n, prompt_length), tokenizer.pad_token_id)
    responses = torch.full((n, response_length), tokenizer.pad_token_id)
    mask = torch.zeros((n, prompt_length + response_length), dtype=torch.long)
    prompt_ids = tokenizer.encode("Score the documents.", add_special_tokens=False)
    for i, text in enumerate(completions):
        ids = tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id]
        assert len(ids) <= response_length
        prompts[i, prompt_length - len(prompt_ids):] = torch.tensor(prompt_ids)
        responses[i, : len(ids)] = torch.tensor(ids)
        mask[i, prompt_length - len(prompt_ids): prompt_length + len(ids)] = 1
    return DataProto.from_dict(
        tensors={"prompts": prompts, "responses": responses, "input_ids": torch.cat([prompts, responses], 1),
                 "attention_mask": mask},
        non_tensors={
            "data_source": np.array(["rearank/dl21"] * n, dtype=object),
            "reward_model": np.array([{"style": "rule", "ground_truth": ground_truth}] * n, dtype=object),
            "extra_info": np.array([{"index": i} for i in range(n)], dtype=object),
        },
    )


@pytest.mark.parametrize("path", ["pkg://rearank.grouprank.reward", group_reward.__file__])
def test_reward_loop_worker_scores_groupwise_completions(tokenizer_dir, path):
    config = verl_config(tokenizer_dir, path)
    loop = asyncio.new_event_loop()  # a Ray actor's loop in training: the worker binds it when created
    asyncio.set_event_loop(loop)
    worker = RewardLoopWorker(config)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    ground_truth = json.dumps({"labels": LABELS})
    data = batch(tokenizer, COMPLETIONS, ground_truth)

    try:
        outputs = loop.run_until_complete(worker.compute_score_batch(data))
    finally:
        asyncio.set_event_loop(None)
        loop.close()
    scores = [o["reward_score"] for o in outputs]
    expected = [group_reward.compute_score("rearank/dl21", c, ground_truth, **REWARD_KWARGS) for c in COMPLETIONS]
    assert scores == pytest.approx([e["score"] for e in expected])
    assert scores[0] == pytest.approx(0.3 + 0.5 + 0.1 * expected[0]["r_dist"])  # ideal ranking, kwargs applied
    assert 0.0 < scores[1] < scores[0] and scores[2] == 0.0 and scores[3] == -1.0
    assert expected[0] != group_reward.compute_score("rearank/dl21", COMPLETIONS[0], ground_truth)

    # the manager's extra info has the same numeric keys for every sample (verl stacks them into arrays)
    extras = [o["reward_extra_info"] for o in outputs]
    assert all(set(e) == set(group_reward.PARTS) for e in extras)
    stacked = {key: np.array([e[key] for e in extras]) for key in extras[0]}
    assert stacked["format_tags"].tolist() == [1.0, 1.0, 1.0, 0.0]

    # the score lands on the last response token, as verl's advantage computation expects
    rm_scores = resolve_reward_manager_cls(config).assemble_rm_scores(data, scores)
    lengths = data.batch["attention_mask"][:, 16:].sum(-1)
    for i, length in enumerate(lengths.tolist()):
        assert rm_scores[i, length - 1].item() == pytest.approx(scores[i])
        assert rm_scores[i].abs().sum().item() == pytest.approx(abs(scores[i]))
