"""The benchmark suite's ``--first-stage RUN``: another retriever's run (GroupRank's BRIGHT setting: DIVER-4B's)
reranked in place of the pack's BM25 run, and evaluated as the first stage beside the rerank."""

from __future__ import annotations

import json

import pytest

from benchmark import run as suite_run
from rearank.data.packs import load_qrels
from rearank.io.trec import read_run
from rearank.measures.ir import evaluate
from tests.conftest import require_pack


def test_first_stage_run_replaces_bm25(tmp_path, monkeypatch):
    pack = require_pack("beir/scifact")
    monkeypatch.setenv("REARANK_DATA", str(pack.parents[1]))
    # a second retriever's run: the BM25 top-100 with the scores negated (its order reversed), named per dataset
    lines = (pack / "run.bm25-flat.top100.trec").read_text().splitlines()
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "beir-scifact.trec").write_text(
        "".join(f"{q} Q0 {d} {r} {-float(s)} other\n" for q, _, d, r, s, _ in map(str.split, lines)))
    out = tmp_path / "out"
    code = suite_run.main(["--suite", "beir-scifact", "--backend", "oracle", "--method", "groupwise", "--max-queries",
                           "20", "--first-stage", str(runs / "{dataset}.trec"), "--output-dir", str(out), "--no-progress"])
    assert code == 0
    metrics = json.loads((out / "beir-scifact" / "metrics.json").read_text())
    assert metrics["first_stage"] == str(runs / "beir-scifact.trec")
    qrels = load_qrels("beir-scifact")
    judged = {q: qrels[q] for q in metrics["rerank"]["per_query"]}
    reversed_ndcg = evaluate(judged, read_run(runs / "beir-scifact.trec")).aggregate["ndcg_cut_10"]
    bm25_ndcg = evaluate(judged, read_run(pack / "run.bm25-flat.top100.trec")).aggregate["ndcg_cut_10"]
    assert metrics["bm25"]["aggregate"]["ndcg_cut_10"] == pytest.approx(reversed_ndcg)
    assert reversed_ndcg < bm25_ndcg
    # the oracle reorders the same top-100 pool either way: the rerank reaches the pool's ideal order
    assert metrics["rerank"]["aggregate"]["ndcg_cut_10"] > bm25_ndcg
    assert json.loads((out / "suite.json").read_text())["first_stage"] == str(runs / "{dataset}.trec")


def test_missing_first_stage_run_skips_the_dataset_naming_the_file(tmp_path, monkeypatch, capsys):
    """Like a missing pack: the dataset is skipped with a line naming the run file, the others go on (a suite that
    ran none exits 2)."""
    pack = require_pack("beir/scifact")
    monkeypatch.setenv("REARANK_DATA", str(pack.parents[1]))
    code = suite_run.main(["--suite", "beir-scifact", "--backend", "oracle", "--max-queries", "2",
                           "--first-stage", str(tmp_path / "{dataset}.trec"), "--output-dir", str(tmp_path / "o"),
                           "--no-progress"])
    captured = capsys.readouterr()
    assert code == 2 and "0 datasets done, 1 skipped" in captured.out
    assert "benchmark.run: error: no dataset ran (beir-scifact: " in captured.err
    assert f"--first-stage run {tmp_path / 'beir-scifact.trec'} not found" in captured.err
