"""The benchmark suite end to end on the shared packs with the oracle backend: tables, plot, resume, analyses."""

from __future__ import annotations

import json
import os

import pytest

from benchmark import analyses, compare
from benchmark import run as suite_run
from benchmark.results import load_suite
from rearank.backends import registry
from rearank.backends.oracle import OracleBackend
from rearank.cli import main as rearank_main
from rearank.data.packs import load_qrels
from rearank.io.trec import read_run
from rearank.run.files import read_traces
from tests.unit.test_eval_report import parse_tables

TABLE1 = "Table 1: TREC-DL and BEIR (nDCG@10)"


@pytest.fixture
def packs_env(dl19, scifact, monkeypatch):
    """REARANK_DATA pointing at the shared packs (dl19 and scifact must be there; dl21 is used when present)."""
    monkeypatch.setenv("REARANK_DATA", str(dl19.parents[1]))


@pytest.fixture(scope="module")
def oracle_suite(tmp_path_factory):
    """dl19 and scifact in full (their BM25 rows must equal the paper's), dl21 on 5 queries, one missing pack."""
    from tests.conftest import require_pack

    root = require_pack("msmarco-v1-passage/dl19").parents[1]
    require_pack("beir/scifact")
    old = os.environ.get("REARANK_DATA")
    os.environ["REARANK_DATA"] = str(root)
    out = tmp_path_factory.mktemp("suite") / "oracle"
    try:
        code = suite_run.main(["--suite", "dl19,beir-scifact,beir-trec-covid", "--backend", "oracle",
                               "--output-dir", str(out), "--no-progress"])
        assert code == 0
        yield load_suite(out)
    finally:
        if old is None:
            os.environ.pop("REARANK_DATA")
        else:
            os.environ["REARANK_DATA"] = old


def test_bm25_row_equals_the_papers_on_shared_packs(oracle_suite):
    table = {r["Model"]: r for r in parse_tables((oracle_suite.path / "report.md").read_text())[TABLE1]}
    ours, paper = table["BM25 (ours)"], table["BM25 (paper)"]
    assert ours["DL19"] == paper["DL19"] == "50.58"
    assert ours["SciFact"] == paper["SciFact"] == "67.89"
    assert oracle_suite.datasets["dl19"].score("bm25") == pytest.approx(0.5058, abs=5e-5)
    assert oracle_suite.datasets["beir-scifact"].score("bm25") == pytest.approx(0.6789, abs=5e-5)


def test_report_numbers_equal_metrics_json(oracle_suite):
    text = (oracle_suite.path / "report.md").read_text()
    tables = parse_tables(text)
    row = {r["Model"]: r for r in tables[TABLE1]}["oracle (ours)"]
    for name, label in (("dl19", "DL19"), ("beir-scifact", "SciFact")):
        metrics = json.loads((oracle_suite.path / name / "metrics.json").read_text())
        assert float(row[label]) == pytest.approx(100 * metrics["rerank"]["aggregate"]["ndcg_cut_10"], abs=0.005)
        assert set(metrics["rerank"]["per_query"]) == set(load_qrels(name))
        measures = {(r["System"], r["Dataset"]): r for r in tables["All measures (x 100)"]}
        for system, key in (("BM25", "bm25"), ("oracle", "rerank")):
            for measure, column in (("ndcg_cut_1", "nDCG@1"), ("recall_100", "R@100"), ("map_cut_100", "MAP@100")):
                assert float(measures[(system, name)][column]) == pytest.approx(
                    100 * metrics[key]["aggregate"][measure], abs=0.005)
    assert float(row["SciFact"]) > 67.89  # the oracle beats BM25
    assert "- skipped `beir-trec-covid`: dataset pack 'beir-trec-covid' is not at" in text
    assert "rearank data fetch beir-trec-covid" in text


def test_efficiency_figures_match_traces(oracle_suite):
    from rearank.data import packs
    from rearank.methods.listwise.window import schedule

    rows = {r["Dataset"]: r for r in parse_tables((oracle_suite.path / "report.md").read_text())["Efficiency"]}
    for name, result in oracle_suite.datasets.items():
        traces = read_traces(oracle_suite.path / name / "traces.jsonl")
        windows = [t for ts in traces.values() for t in ts]
        assert rows[name]["Queries"] == str(len(traces)) == str(result.metrics["queries"])
        bm25 = read_run(packs.resolve(name).run)
        expected = sum(len(schedule(min(len(bm25[q]), 100), 20, 10)) for q in traces)
        assert rows[name]["LLM calls"] == str(len(windows)) == str(expected)
        assert rows[name]["Completion tok"] == str(sum(t.completion_tokens for t in windows))
        assert rows[name]["Parse status"] == f"ok {len(windows)}"
        assert float(rows[name]["Queries/s"]) > 0


def test_traces_replay_to_the_run(oracle_suite):
    from rearank.data import packs

    bm25 = read_run(packs.resolve("dl19").run)
    run = read_run(oracle_suite.path / "dl19" / "run.trec")
    for qid, traces in read_traces(oracle_suite.path / "dl19" / "traces.jsonl").items():
        assert analyses.replay([d for d, _ in bm25[qid]], traces) == [d for d, _ in run[qid]]


def test_plot_is_a_png(oracle_suite):
    data = (oracle_suite.path / "ndcg10.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    assert "![nDCG@10 comparison](ndcg10.png)" in (oracle_suite.path / "report.md").read_text()


def test_rearank_benchmark_is_the_same_command(packs_env, tmp_path):
    out = tmp_path / "b"
    assert rearank_main(["benchmark", "--suite", "dl19", "--backend", "oracle", "--max-queries", "2",
                         "--output-dir", str(out), "--no-progress"]) == 0
    suite = load_suite(out)
    assert suite.config["max_queries"] == 2 and suite.datasets["dl19"].metrics["queries"] == 2
    assert "first 2 queries per dataset only" in (out / "report.md").read_text()
    # existing results are not overwritten without --resume, nor resumed with other settings
    assert rearank_main(["benchmark", "--suite", "dl19", "--backend", "oracle", "--output-dir", str(out)]) == 2
    assert rearank_main(["benchmark", "--suite", "dl19", "--backend", "oracle", "--max-queries", "3", "--resume",
                         "--output-dir", str(out)]) == 2
    assert rearank_main(["benchmark", "--suite", "nosuch", "--backend", "oracle", "--output-dir", str(tmp_path / "c")]) == 2


def test_interrupted_suite_resumes_per_query_and_keeps_done_datasets(packs_env, tmp_path, monkeypatch, capsys):
    args = ["--suite", "beir-scifact,dl19", "--backend", "oracle", "--max-queries", "6", "--batch-size", "2",
            "--no-progress"]
    assert suite_run.main([*args, "--output-dir", str(tmp_path / "full")]) == 0

    class Interrupted(OracleBackend):
        calls = 0

        def generate(self, prompts, settings):
            Interrupted.calls += 1
            if Interrupted.calls == 27 + 12:  # scifact takes 27 calls; then dl19, in its second pair of queries
                raise KeyboardInterrupt
            return super().generate(prompts, settings)

    real = registry.make_backend
    monkeypatch.setattr(registry, "make_backend", lambda name, model=None, **o: Interrupted(o["qrels"]))
    out = tmp_path / "resumed"
    assert suite_run.main([*args, "--output-dir", str(out)]) == 130
    assert (out / "beir-scifact" / "metrics.json").is_file()
    assert not (out / "dl19" / "metrics.json").exists()
    partial = read_run(out / "dl19" / "run.trec")
    assert 0 < len(partial) < 6
    scifact_mtime = (out / "beir-scifact" / "metrics.json").stat().st_mtime_ns

    monkeypatch.setattr(registry, "make_backend", real)
    capsys.readouterr()
    assert suite_run.main([*args, "--output-dir", str(out), "--resume"]) == 0
    assert "beir-scifact: done earlier, kept" in capsys.readouterr().err
    assert (out / "beir-scifact" / "metrics.json").stat().st_mtime_ns == scifact_mtime
    assert read_run(out / "dl19" / "run.trec") == read_run(tmp_path / "full" / "dl19" / "run.trec")
    stats = json.loads((out / "dl19" / "stats.json").read_text())
    assert stats["queries"] == 6 and stats["calls"] == 54 and stats["resumed_queries"] == len(partial)
    assert len([t for ts in read_traces(out / "dl19" / "traces.jsonl").values() for t in ts]) == 54

    rows = compare.compare(load_suite(tmp_path / "full"), load_suite(out), permutations=200)
    assert {r.dataset for r in rows} == {"dl19", "beir-scifact"}
    assert all(r.delta == 0 and r.ties == 6 and r.t_p == 1.0 for r in rows)


def test_passes_and_length_analyses(packs_env, tmp_path):
    out = tmp_path / "passes"
    assert analyses.main(["passes", "--suite", "dl19", "--backend", "oracle", "--max-queries", "4", "--passes", "2",
                          "--output-dir", str(out), "--no-progress"]) == 0
    suite = load_suite(out)
    curve = analyses.pass_curves(suite)["dl19"]
    assert len(curve) == 3
    assert curve[0] == pytest.approx(suite.datasets["dl19"].score("bm25"))
    assert curve[-1] == pytest.approx(suite.datasets["dl19"].score())
    rows = {r["Dataset"]: r for r in parse_tables((out / "passes.md").read_text())[""]}
    assert float(rows["dl19"]["2"]) == pytest.approx(100 * curve[2], abs=0.005)
    assert (out / "passes.png").read_bytes()[:4] == b"\x89PNG"

    assert analyses.main(["length", str(out), "--bins", "20"]) == 0
    scores = analyses.suite_window_scores(suite, ["dl19"])
    assert scores and all(s.after == pytest.approx(1.0) for s in scores)  # the oracle orders each window ideally
    bins = analyses.length_bins(scores, 20)
    assert len(bins) == 20 and sum(b.windows for b in bins) == len(scores)
    assert (out / "reasoning_length.png").read_bytes()[:4] == b"\x89PNG"


def test_reasoning_analysis_runs_both_prompts(packs_env, tmp_path):
    out = tmp_path / "reasoning"
    assert analyses.main(["reasoning", "--suite", "dl19", "--backend", "oracle", "--max-queries", "2",
                          "--output-dir", str(out), "--no-progress"]) == 0
    assert load_suite(out / "reasoning").config["template"] == "rearank"
    assert load_suite(out / "zero-shot").config["template"] == "rankgpt"
    text = (out / "reasoning.md").read_text()
    rows = {r["Dataset"]: r for r in parse_tables(text)[""]}
    assert float(rows["dl19"]["Reasoning"]) == pytest.approx(100 * load_suite(out / "reasoning").datasets["dl19"].score(),
                                                             abs=0.005)
    assert "Table 4" in text


def test_groupwise_benchmark_reaches_the_groupwise_oracle_ceiling(packs_env, tmp_path):
    """``rearank benchmark --method groupwise``: one group of 100 per dl19 query, judged by the oracle, reaches the
    ideal nDCG@10 of the candidates (0.8922, as the listwise oracle does) with one call per query."""
    out = tmp_path / "gw"
    assert rearank_main(["benchmark", "--suite", "dl19", "--method", "groupwise", "--backend", "oracle",
                         "--group-size", "100", "--output-dir", str(out), "--no-progress"]) == 0
    metrics = json.loads((out / "dl19" / "metrics.json").read_text())
    assert round(metrics["rerank"]["aggregate"]["ndcg_cut_10"], 4) == 0.8922
    assert json.loads((out / "dl19" / "stats.json").read_text())["calls"] == 43
    assert json.loads((out / "suite.json").read_text())["method"] == "groupwise"
