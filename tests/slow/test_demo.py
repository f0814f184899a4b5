"""The demo end to end with the embedded SmolLM2-135M on CPU (hf backend), on small settings."""

import json

import pytest

from rearank.demo import main
from tests.conftest import require

pytestmark = pytest.mark.slow


def test_demo_reranks_with_the_embedded_model(dl19, monkeypatch, tmp_path, capsys):
    require("transformers", "the `hf` extra")
    monkeypatch.setenv("REARANK_DATA", str(dl19.parents[1]))
    code = main(["--out", str(tmp_path), "--queries", "2", "--top-k", "25", "--max-new-tokens", "8",
                 "--max-passage-tokens", "24"])
    printed = capsys.readouterr().out
    assert code == 0
    assert "nDCG@10 on 2 judged queries: before" in printed and "ranks near chance" in printed.replace("\n", " ")
    assert "first window (query" in printed
    run = (tmp_path / "run.trec").read_text().splitlines()
    assert len(run) == 200  # every BM25 candidate is kept: top-25 reranked, the rest in BM25 order
    traces = [json.loads(line) for line in (tmp_path / "run.trec.traces.jsonl").read_text().splitlines()]
    assert [(t["start"], t["end"]) for t in traces[:2]] == [(5, 25), (0, 20)]
    assert all(t["prompt_tokens"] > 20 * 24 // 2 and 0 < t["completion_tokens"] <= 8 for t in traces)
    stats = json.loads((tmp_path / "run.trec.stats.json").read_text())
    assert stats["calls"] == 4 and sum(stats["status_counts"].values()) == 4
    assert stats["prompt_tokens"] == sum(t["prompt_tokens"] for t in traces)
