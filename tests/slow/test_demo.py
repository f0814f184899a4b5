"""The demo end to end with the embedded SmolLM2-135M on CPU (hf backend), on small settings: with the constraint
every window parses; the table reports both runs."""

import json

import pytest

from rearank.cli.demo import main
from rearank.methods.listwise.answer import parse_answer
from tests.conftest import require

pytestmark = pytest.mark.slow


def test_demo_reranks_with_and_without_the_constraint(dl19, monkeypatch, tmp_path, capsys):
    require("transformers", "the `hf` extra")
    monkeypatch.setenv("REARANK_DATA", str(dl19.parents[1]))
    code = main(["--output-dir", str(tmp_path), "--queries", "2", "--top-k", "15", "--window", "10", "--step", "5",
                 "--max-new-tokens", "96", "--max-think-tokens", "8", "--passage-budget", "24t"])
    printed = capsys.readouterr().out
    assert code == 0
    assert "ranks near chance" in printed.replace("\n", " ")
    assert "constrain=off" in printed and "first window with constrain=answer" in printed
    for folder in ("free", "constrained"):
        run = (tmp_path / folder / "run.trec").read_text().splitlines()
        assert len(run) == 200  # every BM25 candidate is kept: top-15 reranked, the rest in BM25 order
        stats = json.loads((tmp_path / folder / "run.trec.stats.json").read_text())
        assert stats["calls"] == 4 and sum(stats["status_counts"].values()) == 4  # windows (5, 15), (0, 10)
    traces = [json.loads(line) for line in (tmp_path / "constrained/run.trec.traces.jsonl").read_text().splitlines()]
    assert [(t["start"], t["end"]) for t in traces[:2]] == [(5, 15), (0, 10)]
    for trace in traces:  # the shared parser reads every constrained answer as a full permutation, cleanly
        parsed = parse_answer(trace["raw_output"], trace["end"] - trace["start"])
        assert parsed.status == trace["status"] == "ok" and parsed.strict_format, trace["raw_output"]
        assert trace["think_tokens"] <= 8 and trace["completion_tokens"] <= 96
    assert "4/4 (100%)" in printed
