"""recipes/checks/learn.py's own logic: scoring held-out answers, the paired test, the verdict, layer freezing."""

import argparse
import json

import pytest

from rearank.errors import RearankError
from recipes.checks.learn import build_parser, check_args, freeze_lower_layers, paired_test, score_answers, verdict
from tests.conftest import require

TRUTH = json.dumps({"labels": [0, 2, 0, 1, 0]})


def test_score_answers_reads_answers_as_the_reward_and_parser_do():
    texts = ["<think>\n</think>\n<answer>[2] > [4] > [1] > [3] > [5]</answer>",  # ideal
             "<think>\n</think>\n<answer>[1] > [2] > [3] > [4] > [5]</answer>",  # the presented order
             "[2] > [4]",  # ids missing: repaired, not format-valid
             "no ids at all"]
    figures = score_answers(texts, [{"ground_truth": TRUTH}] * 4)
    assert figures["rewards"][0] == pytest.approx(1.0)  # 0.8 r_rank + 0.1 tags + 0.1 answer
    assert figures["rewards"][1] == pytest.approx(0.2)  # r_rank 0: no gain over the presented order
    assert figures["rewards"][3] == 0.0
    assert figures["format_valid"] == 0.5
    assert figures["kept_order"] == 0.5  # the identity answer and the one that names nothing
    assert figures["statuses"] == {"ok": 2, "missing_ids": 1, "wrong_format": 1}
    assert figures["mean_reward"] == pytest.approx(sum(figures["rewards"]) / 4)


def evaluations(sft, grpo):
    return [{"stage": "base", "step": 0, "rewards": [0.0] * len(sft), "mean_reward": 0.0, "format_valid": 0.0,
             "ndcg": 0.5, "kept_order": 1.0},
            {"stage": "sft", "step": 20, "rewards": sft, "mean_reward": sum(sft) / len(sft), "format_valid": 0.95,
             "ndcg": 0.6, "kept_order": 0.0},
            {"stage": "grpo", "step": 6, "rewards": sft, "mean_reward": 0.0, "format_valid": 0.0, "ndcg": 0.0,
             "kept_order": 0.0},
            {"stage": "grpo", "step": 12, "rewards": grpo, "mean_reward": sum(grpo) / len(grpo),
             "format_valid": 1.0, "ndcg": 0.7, "kept_order": 0.5}]


def test_paired_test_compares_the_last_grpo_evaluation_with_sft_set_by_set():
    sft = [0.1 * (i % 5) for i in range(30)]
    grpo = [r + 0.2 for r in sft[:20]] + sft[20:]
    test = paired_test(evaluations(sft, grpo))
    assert test["baseline"] == "sft" and test["candidate"] == "grpo step 12" and test["sets"] == 30
    assert test["mean_gain"] == pytest.approx(0.2 * 20 / 30)
    assert (test["sets_better"], test["sets_worse"]) == (20, 0)
    assert test["p_value"] < 0.001
    lines = verdict(evaluations(sft, grpo), test)
    assert "significant at 0.05" in lines[-2] and "NOT" not in lines[-2]
    assert lines[-1].startswith("format-valid after SFT 0.950: meets")


def test_no_gain_is_not_significant():
    sft = [0.1 * (i % 5) for i in range(30)]
    test = paired_test(evaluations(sft, list(sft)))
    assert test["mean_gain"] == 0 and test["p_value"] == 1.0
    assert "NOT significant" in verdict(evaluations(sft, list(sft)), test)[-2]


def test_freezing_keeps_the_top_layers_and_the_final_norm_trainable():
    transformers = require("transformers", "the hf extra")
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=4,
                                      num_attention_heads=2, num_key_value_heads=1)
    model = transformers.AutoModelForCausalLM.from_config(config)
    everything = sum(p.numel() for p in model.parameters())
    assert freeze_lower_layers(model, 0) == everything  # 0: train all
    per_layer = sum(p.numel() for p in model.model.layers[0].parameters())
    assert freeze_lower_layers(model, 1) == per_layer + model.model.norm.weight.numel()
    assert not model.model.embed_tokens.weight.requires_grad and not model.model.layers[2].mlp.up_proj.weight.requires_grad
    assert model.model.layers[3].mlp.up_proj.weight.requires_grad


@pytest.mark.parametrize("argv, message", [(["--grpo-steps", "0"], "--grpo-steps must be at least 1"),
                                           (["--generations", "1"], "--generations must be at least 2"),
                                           (["--output", "x.png"], "give a .json path")])
def test_bad_settings_are_one_line_errors(argv, message):
    with pytest.raises(RearankError, match=message):
        check_args(build_parser().parse_args(argv))
    assert isinstance(build_parser().parse_args([]), argparse.Namespace)
