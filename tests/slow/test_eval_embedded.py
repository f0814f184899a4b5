"""The benchmark suite with the embedded SmolLM2 (hf backend) on one query per dataset: the same files and
tables as a real run. The model ranks near chance: this checks mechanics, not quality."""

from __future__ import annotations

import json

import pytest

from benchmark import run as suite_run
from benchmark.results import load_suite
from tests.unit.test_eval_report import parse_tables

pytestmark = pytest.mark.slow

TABLE1 = "Table 1: TREC-DL and BEIR (nDCG@10)"


def test_suite_with_embedded_model_on_a_query_subset(dl19, scifact, monkeypatch, tmp_path):
    monkeypatch.setenv("REARANK_DATA", str(dl19.parents[1]))
    out = tmp_path / "smollm2"
    code = suite_run.main(["--suite", "dl19,beir-scifact", "--backend", "hf", "--model", "embedded",
                           "--max-queries", "1", "--top-k", "20", "--passage-budget", "32",
                           "--max-new-tokens", "16", "--label", "SmolLM2-135M", "--output-dir", str(out), "--no-progress"])
    assert code == 0
    suite = load_suite(out)
    text = (out / "report.md").read_text()
    row = {r["Model"]: r for r in parse_tables(text)[TABLE1]}["SmolLM2-135M (ours)"]
    for name, label in (("dl19", "DL19"), ("beir-scifact", "SciFact")):
        folder = out / name
        assert {p.name for p in folder.iterdir()} >= {"run.trec", "traces.jsonl", "metrics.json", "stats.json"}
        metrics = json.loads((folder / "metrics.json").read_text())
        assert float(row[label]) == pytest.approx(100 * metrics["rerank"]["aggregate"]["ndcg_cut_10"], abs=0.005)
        stats = json.loads((folder / "stats.json").read_text())
        traces = [json.loads(line) for line in (folder / "traces.jsonl").read_text().splitlines()]
        assert len(traces) == 1  # one query, top-20: one window, one LLM call
        assert stats["calls"] == 1 and stats["completion_tokens"] == traces[0]["completion_tokens"] > 0
        assert sum(stats["status_counts"].values()) == 1
    assert set(suite.datasets) == {"dl19", "beir-scifact"}
    assert (out / "ndcg10.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "## Efficiency" in text
