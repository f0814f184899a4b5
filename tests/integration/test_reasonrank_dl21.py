"""``rearank synth --method reasonrank`` on the real dl21 pack with the oracle teacher, through the command line; and
the answer-only rows of ``--method listwise --reasoning off``."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from rearank.cli import main
from rearank.methods.listwise.reasonrank import compute_score, parse_truth
from tests.conftest import require_pack


@pytest.fixture(scope="module")
def dl21():
    return require_pack("msmarco-v2-passage/dl21")


def test_oracle_teacher_lists_become_filtered_sft_and_rl_rows(dl21, tmp_path, capsys):
    out = tmp_path / "rr"
    assert main(["synth", "--method", "reasonrank", "--dataset", "dl21", "--teacher", "oracle", "--samples-per-query",
                 "2", "--max-queries", "6", "--set-size", "8", "--output-dir", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    stats = json.loads((out / "stats.json").read_text())
    assert stats["lists"] == 12 and stats["filter"]["kept"] + stats["filter"]["dropped_below_alpha"] == 12
    assert f"kept {stats['filter']['kept']} (teacher nDCG@10 >= 0.4)" in printed
    assert "self-consistency filter" in (out / "stats.md").read_text()
    rows = pq.read_table(out / "train.parquet").to_pylist() + pq.read_table(out / "val.parquet").to_pylist()
    sft = [json.loads(line) for split in ("train", "val") for line in (out / f"sft_{split}.jsonl").open()]
    assert len(rows) == len(sft) == stats["filter"]["kept"] > 0
    for row, example in zip(rows, sft):
        truth = parse_truth(row["reward_model"]["ground_truth"])
        assert len(truth.ids) == 8 and truth.relevant and row["data_source"] == "reasonrank/dl21"
        target = example["completion"][0]["content"]
        assert target.startswith("<think>\nRelevance judgments:")
        assert compute_score(row["data_source"], target, row["reward_model"]["ground_truth"])["score"] == 1.3
    assert pq.read_table(out / "sft_train.parquet").column_names == ["messages", "qid"]


def test_answer_only_rows_on_request(dl21, tmp_path):
    out = tmp_path / "off"
    assert main(["synth", "--dataset", "dl21", "--samples-per-query", "1", "--set-size", "5", "--sft", "--reasoning",
                 "off", "--tokenizer", "none", "--output-dir", str(out), "--quiet"]) == 0
    example = json.loads((out / "sft_train.jsonl").open().readline())
    assert example["completion"][0]["content"].startswith("<answer>[")
    assert "<think>" not in example["prompt"][-1]["content"]
    assert json.loads((out / "stats.json").read_text())["config"]["template"] == "rearank-answer"
