"""``rearank benchmark --expect`` after a real suite run (the oracle backend on two dl19 queries): the check reads
what the run wrote, and a checkpoint that does not resolve stops the command before anything runs."""

from __future__ import annotations

import json

from benchmark.expect import OUTSIDE, WITHIN
from rearank.cli import main as rearank_main
from tests.unit.test_eval_report import parse_tables


def test_expect_checks_the_suite_it_just_ran(dl19, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("REARANK_DATA", str(dl19.parents[1]))
    figures = tmp_path / "figures.json"
    figures.write_text(json.dumps({"name": "oracle", "figures": {"dl19": [0.0, 100.0]}}))
    out = tmp_path / "suite"
    suite = ["benchmark", "--suite", "dl19", "--backend", "oracle", "--max-queries", "2", "--output-dir", str(out),
             "--no-progress"]
    assert rearank_main([*suite, "--expect", str(figures), "--expect-model", "oracle"]) == 0
    [row] = parse_tables(capsys.readouterr().out)[""]
    metrics = json.loads((out / "dl19" / "metrics.json").read_text())
    assert row["Measured"] == f"{100 * metrics['rerank']['aggregate']['ndcg_cut_10']:.2f}"
    assert row["Verdict"] == WITHIN
    figures.write_text(json.dumps({"name": "oracle", "figures": {"dl19": 1.0}}))
    assert rearank_main(["benchmark", "--output-dir", str(out), "--report-only", "--expect", str(figures),
                         "--expect-model", "oracle"]) == 1
    assert parse_tables(capsys.readouterr().out)[""][0]["Verdict"] == OUTSIDE


def test_an_unknown_checkpoint_fails_before_the_suite_runs(dl19, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("REARANK_DATA", str(dl19.parents[1]))
    out = tmp_path / "suite"
    assert rearank_main(["benchmark", "--suite", "dl19", "--backend", "oracle", "--output-dir", str(out),
                         "--expect", "published", "--expect-model", "Rearank-8B"]) == 2
    assert "no figures for model 'Rearank-8B'; known: Rearank-7B" in capsys.readouterr().err
    assert not out.exists()
