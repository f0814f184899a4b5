"""`rag eval` with the embedded SmolLM2 as the reader (hf backend) and as a pointwise selector: mechanics only,
the 135M model answers near chance."""

from __future__ import annotations

import json

import pytest

from rearank.cli import main
from tests.conftest import require_pack

pytestmark = pytest.mark.slow


def test_smollm2_reader_end_to_end_and_cache(tmp_path, capsys):
    data = require_pack("qa") / "hotpotqa/dev_distractor.first103.json"
    cache = tmp_path / "cache.jsonl"
    args = ["rag", "eval", "--data", str(data), "--limit", "3", "--selector", "oracle", "--reader", "hf",
            "--reader-model", "embedded", "--template", "rrpo", "--k", "1,2", "--max-new-tokens", "12",
            "--reader-cache", str(cache), "--no-progress"]
    assert main([*args, "--output-dir", str(tmp_path / "a")]) == 0
    assert "reader calls: 6;" in capsys.readouterr().out  # 3 questions x 2 values of k
    rows = [json.loads(x) for x in (tmp_path / "a" / "items.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and all(r["k"]["2"]["response"].strip() for r in rows)
    assert all(0.0 <= r["k"]["1"]["f1"] <= 1.0 for r in rows)
    assert len(cache.read_text().splitlines()) == 6
    # the same prompts again, in a new folder: every answer comes from the cache, identical
    assert main([*args, "--output-dir", str(tmp_path / "b")]) == 0
    assert "reader calls: 0;" in capsys.readouterr().out
    again = [json.loads(x) for x in (tmp_path / "b" / "items.jsonl").read_text().splitlines()]
    assert [r["k"]["2"]["response"] for r in again] == [r["k"]["2"]["response"] for r in rows]


def test_embedded_pointwise_selector(tmp_path):
    data = require_pack("qa") / "hotpotqa/dev_distractor.first103.json"
    out = tmp_path / "p"
    assert main(["rag", "eval", "--data", str(data), "--limit", "2", "--selector", "pointwise:embedded",
                 "-S", "num_layers=4", "-S", "max_passage_tokens=32", "--k", "2", "--output-dir", str(out),
                 "--no-progress"]) == 0
    rows = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
    assert [sorted(r["ranking"], key=int) for r in rows] == [[str(i) for i in range(10)]] * 2


def test_embedded_listwise_selector(tmp_path):
    data = require_pack("qa") / "hotpotqa/dev_distractor.first103.json"
    out = tmp_path / "l"
    assert main(["rag", "eval", "--data", str(data), "--limit", "1", "--selector", "listwise:embedded",
                 "-S", "window=10", "-S", "max_new_tokens=24", "--k", "3", "--output-dir", str(out), "--no-progress"]) == 0
    (row,) = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
    assert sorted(row["ranking"], key=int) == [str(i) for i in range(10)]
    assert row["k"]["3"]["passages"] == row["ranking"][:3]


def test_embedded_barrag_selector_and_arena_generator(tmp_path, capsys):
    """Mechanics only: SmolLM2 as a BAR-RAG selector and generator, then as an ARENA generator."""
    data = require_pack("qa") / "hotpotqa/dev_distractor.first103.json"
    common = ["rag", "eval", "--data", str(data), "--limit", "2", "--reader", "hf", "--reader-model", "embedded",
              "--max-new-tokens", "16", "--no-progress"]
    assert main([*common, "--selector", "barrag:embedded", "-S", "max_new_tokens=24", "--template", "barrag_generator",
                 "--k", "2", "--output-dir", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "BAR-RAG iteration 3" in out and "selector outputs:" in out
    metrics = json.loads((tmp_path / "b" / "metrics.json").read_text())
    assert sum(metrics["selector_statuses"].values()) == 2
    assert main([*common, "--template", "arena", "--output-dir", str(tmp_path / "a")]) == 0
    assert "ARENA paper (Table 3)" in capsys.readouterr().out
    rows = [json.loads(x) for x in (tmp_path / "a" / "items.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(len(r["k"]["arena"]["shown"]) == 10 for r in rows)
    assert all(0.0 <= r["k"]["arena"]["relevance_recall"] <= 1.0 for r in rows)
