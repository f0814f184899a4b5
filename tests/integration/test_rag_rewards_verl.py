"""verl 0.9.1 scores the RAG rewards through its reward loop worker (naive reward manager) with each RAG recipe's
``custom_reward_function``: ARENA and the BAR-RAG generator synchronously, the BAR-RAG selector's async reward
awaited by verl and asking the noisy-oracle reader behind ``python -m rearank.backends.chat_server`` on 127.0.0.1."""

import asyncio
import json

import pytest

from tests.conftest import require

require("verl", "verl is in the `train` extra")
require("hydra", "hydra-core comes with verl")

from transformers import AutoTokenizer

from rearank.backends.models import embedded_model_path
from rearank.io.qa import load_qa
from rearank.methods.barrag.prompt import selector_messages
from rearank.methods.barrag.reward import compute_selector_score
from recipes.checks.check import completion_batch, compose_recipe, score_with_verl
from recipes.checks.check_rag import run_checks
from recipes.checks.completions import arena, generator, selector
from recipes.checks.serving import reader_server
from tests.conftest import require_pack


@pytest.fixture(scope="module")
def model_dir():
    return embedded_model_path()


@pytest.fixture(scope="module")
def tokenizer(model_dir):
    return AutoTokenizer.from_pretrained(model_dir)


def row(truth, prompt="Answer the question.", index=0):
    return {"raw_prompt": [{"role": "user", "content": prompt}], "data_source": "rag/check",
            "reward_model": {"style": "rule", "ground_truth": json.dumps(truth)},
            "extra_info": {"index": index, "qid": str(index)}}


def test_arena_reward_through_verl(model_dir, tokenizer):
    config = compose_recipe("arena/grpo", [f"actor_rollout_ref.model.path={model_dir}"])
    truth = {"answers": ["Paris"], "supporting": [2, 4]}
    data, kinds, _ = completion_batch([row(truth)], tokenizer, arena)
    scores, extras, rm_scores = score_with_verl(config, data)
    # gold 1+1+1+10; partial: format 1 + relevance 0.5 ([2] overlaps [2, 4]); leading word: accuracy + relevance
    assert dict(zip(kinds, scores)) == {"gold": 13.0, "partial": 1.5, "leading_word": 2.0, "garbage": 0.0}
    assert [e["bonus"] for e in extras] == [10.0, 0.0, 0.0, 0.0]
    lengths = data.batch["response_mask"].sum(-1)
    assert rm_scores[0, lengths[0] - 1].item() == 13.0 and rm_scores[0].sum().item() == 13.0


def test_generator_reward_through_verl(model_dir, tokenizer):
    config = compose_recipe("barrag/generator_grpo", [f"actor_rollout_ref.model.path={model_dir}"])
    data, kinds, _ = completion_batch([row({"answers": ["Claudio Javier López"]})], tokenizer, generator)
    scores, extras, _ = score_with_verl(config, data)
    # 0.8 (0.7 F1 + 0.3 EM) + 0.2 cite: gold 1.0; no think, no cite 0.8; wrong answer, 2 cites 0.2; no answer 0
    assert dict(zip(kinds, scores)) == pytest.approx({"gold": 1.0, "uncited": 0.8, "wrong": 0.2, "garbage": 0.0})
    assert [e["cite"] for e in extras] == [1.0, 0.0, 1.0, 0.0]


def test_selector_reward_through_verl_with_a_served_reader(model_dir, tokenizer):
    qa = require_pack("qa") / "hotpotqa" / "train_distractor.sample100.json"
    item = load_qa(qa, limit=1)[0]
    docs = item.passages
    truth = {"question": item.question, "answers": list(item.answers),
             "docs": [{"title": p.title, "text": p.text} for p in docs], "scores": [5.0] * len(docs),
             "supporting": [i for i, p in enumerate(docs, 1) if p.pid in item.supporting]}
    prompt = selector_messages(item.question, docs)[-1]["content"]
    with reader_server(qa) as url:
        config = compose_recipe("barrag/selector_grpo", [
            f"actor_rollout_ref.model.path={model_dir}",
            f"reward.custom_reward_function.reward_kwargs.reader_url={url}"])
        data, kinds, texts = completion_batch([row(truth, prompt)], tokenizer, selector)
        scores, extras, _ = score_with_verl(config, data)
        direct = [asyncio.run(compute_selector_score("d", t, json.dumps(truth), reader_url=url,
                                                     reader_model="reader")) for t in texts]
    got = dict(zip(kinds, zip(scores, [e["p"] for e in extras])))
    assert scores == pytest.approx([d["score"] for d in direct])  # the seeded reader answers alike both times
    # distractors: no supporting passage shown -> the oracle reader is never right -> p 0, boundary 0;
    # score = 0.2 * 5 / (5 + 10) = 0.0667 (n = 5, no penalty)
    assert got["distractors"] == pytest.approx((0.2 * 5 / 15, 0.0))
    # supporting passages shown: the reader is right with probability 0.7 per sample; score follows p exactly
    score, p = got["supporting"]
    boundary = p / 0.6 if p <= 0.6 else (1 - p) / 0.4
    assert 0 < p <= 1 and score == pytest.approx(boundary + 0.2 * 5 / 15)
    assert got["repeat"] == (0.0, 0.0) and got["garbage"] == (0.0, 0.0)
    assert all(e["reader_failed"] == 0.0 for e in extras)


def test_rag_train_check_covers_the_three_recipes(model_dir, tmp_path):
    """``make train-check``'s RAG half: each recipe and its debug variant validate with verl, rows from the shared QA
    samples load in RLHFDataset, and verl's reward loop scores them (the selector's through a served reader)."""
    require_pack("qa")
    report = "\n".join(run_checks(tmp_path, model_dir, n_rows=1))
    assert report.count("[ok]") == 13, report  # 3 x (2 configs + dataset + reward loop) + the dead reader
    # the released training values of issue 12, as verl composed them from the recipes
    for values in ("8 prompts x 8 rollouts, lr 4e-06, KL low_var_kl 0.001, LoRA 32/16, prompt 4096 + response 1024",
                   "32 prompts x 8 rollouts, lr 5e-06, KL low_var_kl 0.001, LoRA 64/32",
                   "256 prompts x 7 rollouts, lr 3e-06, KL mse 0.04, full fine-tuning, prompt 5120 + response 256"):
        assert values in report, values
    assert "a reader that is down scores -0.5, counted" in report
