"""Synthesis on the real dl21 pack, loaded back through verl's own RLHFDataset and collate_fn on CPU."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from data_synthesis import SynthConfig, synthesize
from data_synthesis.tokens import load_tokenizer
from rearank.data.packs import load_requests
from rearank.io.trec import read_qrels
from rearank.methods.listwise.answer import format_answer, ideal_permutation
from rearank.methods.listwise.reward import compute_score
from tests.conftest import require

verl_dataset = require("verl.utils.dataset.rl_dataset", "verl is in the `train` extra")
omegaconf = require("omegaconf", "the `train` extra")


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("embedded")


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory, tokenizer):
    from tests.conftest import require_pack

    pack = require_pack("msmarco-v2-passage/dl21")
    requests = load_requests(run=pack / "run.bm25.top100.trec", topics=pack / "topics.tsv", docs=pack / "docs.tsv")
    qrels = read_qrels(pack / "qrels.txt")
    out = tmp_path_factory.mktemp("dl21")
    config = SynthConfig(samples_per_query=5, sft=True, data_source="rearank/dl21")
    stats = synthesize(requests, qrels, out, config, tokenizer=tokenizer, tokenizer_name="embedded", progress=False)
    return out, stats, qrels


def rl_dataset(path, tokenizer, max_prompt_length, cache_dir):
    config = omegaconf.OmegaConf.create({
        "prompt_key": "prompt", "max_prompt_length": max_prompt_length, "truncation": "error",
        "filter_overlong_prompts": True, "filter_overlong_prompts_workers": 1, "cache_dir": str(cache_dir),
        "return_raw_chat": True,
    })
    return verl_dataset.RLHFDataset(data_files=str(path), tokenizer=tokenizer, config=config)


def test_dl21_stats_are_consistent(synthesized):
    out, stats, _ = synthesized
    assert stats["inputs"]["queries"] == 53 and stats["inputs"]["skipped_no_qrels"] == 0
    assert stats["sampling"]["sets_drawn"] == 53 * 5
    removed = sum(stats["filters"]["rejected"].values())
    assert stats["filters"]["kept"] == 53 * 5 - removed
    assert stats["splits"]["train"]["sets"] + stats["splits"]["val"]["sets"] == stats["filters"]["kept"]
    assert stats["prompt_tokens"]["check"]["max_abs_error"] == 0
    assert json.loads((out / "stats.json").read_text()) == stats
    assert "Recommended verl" in (out / "stats.md").read_text()


def test_verl_loads_every_row_at_the_recommended_length(synthesized, tokenizer, tmp_path):
    out, stats, _ = synthesized
    rows = pq.read_table(out / "val.parquet").num_rows
    longest = stats["prompt_tokens"]["val"]["max"]
    assert stats["prompt_tokens"]["all"]["max"] <= stats["prompt_tokens"]["recommended_max_prompt_length"]
    # verl's own length filter agrees with our count: everything fits at the longest prompt, one token less does not
    assert len(rl_dataset(out / "val.parquet", tokenizer, longest, tmp_path / "a")) == rows
    assert len(rl_dataset(out / "val.parquet", tokenizer, longest - 1, tmp_path / "b")) < rows


def test_verl_collates_rows_the_reward_can_score(synthesized, tokenizer, tmp_path):
    out, stats, qrels = synthesized
    dataset = rl_dataset(out / "val.parquet", tokenizer, stats["prompt_tokens"]["recommended_max_prompt_length"],
                         tmp_path)
    assert len(dataset) == stats["splits"]["val"]["sets"] > 0
    batch = verl_dataset.collate_fn([dataset[i] for i in range(min(4, len(dataset)))])
    assert tuple(batch["dummy_tensor"].shape) == (len(batch["data_source"]), 1)
    for raw_prompt, reward_model, info in zip(batch["raw_prompt"], batch["reward_model"], batch["extra_info"]):
        labels = json.loads(reward_model["ground_truth"])["labels"]
        assert labels == [qrels[info["qid"]].get(d, 0) for d in info["docids"]] and len(labels) == 20
        assert raw_prompt[-1]["role"] == "user" and "<answer>" in raw_prompt[-1]["content"]
        # the reward scores from ground_truth alone: the ideal ranking earns the full score
        ideal = f"<think>ok</think><answer>{format_answer(ideal_permutation(labels))}</answer>"
        score = compute_score("rearank/dl21", ideal, reward_model["ground_truth"])
        assert score["score"] == pytest.approx(1.0)
        assert score["init_ndcg"] == pytest.approx(info["set_ndcg10"])


def test_sft_rows_are_trl_prompt_completion_pairs(synthesized, tokenizer):
    from trl.data_utils import apply_chat_template, is_conversational

    out, _, _ = synthesized
    example = json.loads((out / "sft_val.jsonl").read_text().splitlines()[0])
    assert is_conversational(example)
    text = apply_chat_template({"prompt": example["prompt"], "completion": example["completion"]}, tokenizer)
    assert text["completion"].startswith("<think>") and "</answer>" in text["completion"]
