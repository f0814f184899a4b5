"""Report tables, paper figures and paired tests of the evaluation suite (pure logic, synthetic results)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from benchmark.compare import compare
from benchmark.report import build_report, load_paper_figures
from benchmark.results import METRICS_FILE, STATS_FILE, SUITE_FILE, load_suite, write_json
from benchmark.suites import BEIR, GROUPS, SUITES, TABLES, expand
from rearank.errors import MissingDataError, RearankError
from rearank.measures.significance import paired_t_p, randomization_p


def parse_tables(markdown: str) -> dict[str, list[dict[str, str]]]:
    """Every markdown table of the report under its nearest ``##`` heading: a list of {column: cell}."""
    tables: dict[str, list[dict[str, str]]] = {}
    heading, header, rows = "", None, []
    for line in markdown.splitlines() + [""]:
        if line.startswith("## "):
            heading = line[3:].strip()
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if header is None:
                header = cells
            elif not all(set(c) <= set("-: ") for c in cells):
                rows.append(dict(zip(header, cells)))
        elif header is not None:
            tables[heading] = rows
            header, rows = None, []
    return tables


def metrics_for(qids: list[str], rng: np.random.Generator) -> dict:
    per_query = {q: {"ndcg_cut_1": float(rng.random()), "ndcg_cut_5": float(rng.random()),
                     "ndcg_cut_10": float(rng.random()), "recall_100": float(rng.random()),
                     "map_cut_100": float(rng.random())} for q in qids}
    aggregate = {m: float(np.mean([v[m] for v in per_query.values()])) for m in next(iter(per_query.values()))}
    return {"aggregate": aggregate, "per_query": per_query}


def make_suite(root: Path, datasets: list[str], done: list[str], seed: int, label: str, skipped=None) -> Path:
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True)
    write_json(root / SUITE_FILE, {"datasets": datasets, "label": label, "backend": "oracle", "model": None,
                                   "template": "rearank", "window": 20, "step": 10, "passes": 1, "top_k": 100,
                                   "max_new_tokens": 64, "skipped": skipped or {}})
    for name in done:
        (root / name).mkdir()
        qids = [f"q{i}" for i in range(7)]
        write_json(root / name / METRICS_FILE, {"dataset": name, "rerank": metrics_for(qids, rng),
                                                "bm25": metrics_for(qids, rng)})
        write_json(root / name / STATS_FILE, {"queries": 7, "calls": 63, "prompt_tokens": 1000,
                                              "completion_tokens": 200, "wall_time_s": 1.5, "queries_per_s": 4.67,
                                              "status_counts": {"ok": 60, "missing_ids": 3}})
    return root


def test_expand_suites_and_lists():
    assert expand("trec-dl") == ["dl19", "dl20"]
    assert expand("beir") == list(BEIR) and len(BEIR) == 7
    assert len(expand("bright")) == 12
    assert expand("all") == list(SUITES["all"])
    assert expand("dl19, dl21,trec-dl") == ["dl19", "dl21", "dl20"]
    with pytest.raises(RearankError):
        expand(" , ")


def test_paper_figures_averages_match_their_rows():
    figures = load_paper_figures()
    assert "arXiv:2505.20046" in figures["citation"]
    for table in TABLES:
        rows = figures["tables"][table.key]["rows"]
        assert [r["model"] for r in rows] == ["BM25", "RankQwen2.5-7B", "RankGPT-4", "RankZephyr-7B", "Rank-R1-7B",
                                              "Rearank-7B"]
        for row in rows:
            assert row["source"]
            assert set(row["values"]) == set(table.columns)
            for group in table.averages:
                mean = sum(row["values"][d] for d in group.datasets) / len(group.datasets)
                # the paper averages unrounded scores, so its printed mean may differ by rounding
                assert row["averages"][group.key] == pytest.approx(mean, abs=0.6 * 10 ** -table.decimals + 1e-9)


def test_project_issue_bm25_figures_are_the_papers():
    values = load_paper_figures()["tables"]["table1"]["rows"][0]["values"]
    assert values["dl19"] == 50.58 and values["dl20"] == 47.96 and values["beir-scifact"] == 67.89
    assert values["beir-trec-covid"] == 59.47 and values["beir-trec-news"] == 39.52
    assert values["beir-nfcorpus"] == 30.75


def test_report_tables_equal_metrics_json(tmp_path):
    datasets = ["dl19", "beir-scifact", "beir-nfcorpus", "dl21", "bright-biology"]
    a = load_suite(make_suite(tmp_path / "a", datasets, ["dl19", "beir-scifact", "dl21", "bright-biology"], 1, "A",
                              skipped={"beir-nfcorpus": "dataset pack 'beir-nfcorpus' is not at /x"}))
    b = load_suite(make_suite(tmp_path / "b", ["dl19"], ["dl19"], 2, "B"))
    text = build_report([a, b])
    tables = parse_tables(text)
    table1 = {r["Model"]: r for r in tables["Table 1: TREC-DL and BEIR (nDCG@10)"]}
    for suite in (a, b):
        row = table1[f"{suite.label} (ours)"]
        for name, result in suite.datasets.items():
            if name in ("dl19", "beir-scifact"):
                label = {"dl19": "DL19", "beir-scifact": "SciFact"}[name]
                assert float(row[label]) == pytest.approx(100 * result.metrics["rerank"]["aggregate"]["ndcg_cut_10"],
                                                          abs=0.005)
        assert row["DL20"] == "—"
    bm25 = table1["BM25 (ours)"]
    assert float(bm25["DL19"]) == pytest.approx(100 * a.datasets["dl19"].score("bm25"), abs=0.005)
    # BEIR average over the 1 of 7 datasets evaluated is flagged as partial
    assert table1["A (ours)"]["BEIR (Avg)"] == f"{100 * a.datasets['beir-scifact'].score():.2f} (1/7)"
    # published rows come from the data file
    paper = load_paper_figures()["tables"]["table1"]["rows"]
    for entry in paper:
        assert float(table1[f"{entry['model']} (paper)"]["DL19"]) == entry["values"]["dl19"]
        assert float(table1[f"{entry['model']} (paper)"]["BEIR (Avg)"]) == entry["averages"]["beir"]
    table2 = {r["Model"]: r for r in tables["Table 2: BRIGHT (nDCG@10)"]}
    assert float(table2["A (ours)"]["Bio."]) == pytest.approx(100 * a.datasets["bright-biology"].score(), abs=0.005)
    other = {r["Model"]: r for r in tables["Other datasets (not in the paper's tables)"]}
    assert float(other["A (ours)"]["dl21"]) == pytest.approx(100 * a.datasets["dl21"].score(), abs=0.005)
    assert "- skipped `beir-nfcorpus`: dataset pack 'beir-nfcorpus' is not at /x" in text
    efficiency = tables["Efficiency"]
    assert len(efficiency) == 5
    first = efficiency[0]
    assert first["LLM calls"] == "63" and first["Parse status"] == "ok 60, missing_ids 3"
    measures = tables["All measures (x 100)"]
    bm25_dl19 = next(r for r in measures if r["System"] == "BM25" and r["Dataset"] == "dl19")
    assert float(bm25_dl19["R@100"]) == pytest.approx(100 * a.datasets["dl19"].score("bm25", "recall_100"), abs=0.005)


def test_full_group_average_is_plain_mean(tmp_path):
    suite = load_suite(make_suite(tmp_path / "s", list(BEIR), list(BEIR), 3, "S"))
    row = {r["Model"]: r for r in parse_tables(build_report([suite]))["Table 1: TREC-DL and BEIR (nDCG@10)"]}["S (ours)"]
    mean = np.mean([100 * suite.datasets[d].score() for d in GROUPS["beir"].datasets])
    assert float(row["BEIR (Avg)"]) == pytest.approx(mean, abs=0.005)
    assert "Table 2" not in build_report([suite])  # no BRIGHT dataset asked for


def test_load_suite_errors(tmp_path):
    with pytest.raises(MissingDataError, match="not a suite result folder"):
        load_suite(tmp_path)
    (tmp_path / SUITE_FILE).write_text("{bad")
    with pytest.raises(RearankError, match=f"{SUITE_FILE}:1"):
        load_suite(tmp_path)


def test_paired_tests_properties():
    rng = np.random.default_rng(0)
    a = rng.random(30)
    assert paired_t_p(a, a) == 1.0 and randomization_p(a, a) == 1.0
    b = a + 0.2 + 0.01 * rng.random(30)
    assert paired_t_p(a, b) < 1e-6 and randomization_p(a, b, 2000) < 0.001
    noisy = a + rng.normal(0, 0.3, 30)
    assert paired_t_p(a, noisy) == pytest.approx(paired_t_p(noisy, a))
    assert randomization_p(a, noisy, seed=5) == randomization_p(noisy, a, seed=5)
    # five all-positive differences: the exact two-sided sign-flip p-value is 2/32
    five = np.array([0.1, 0.2, 0.3, 0.4, 0.5])
    assert randomization_p(np.zeros(5), five, 20000) == pytest.approx(2 / 32, abs=0.01)


def test_compare_pairs_common_queries(tmp_path):
    a = load_suite(make_suite(tmp_path / "a", ["dl19", "dl21"], ["dl19", "dl21"], 4, "A"))
    b = load_suite(make_suite(tmp_path / "b", ["dl19"], ["dl19"], 5, "B"))
    rows = compare(a, b, permutations=500)
    assert [r.dataset for r in rows] == ["dl19"]
    row = rows[0]
    qa, qb = a.datasets["dl19"].per_query(), b.datasets["dl19"].per_query()
    assert row.queries == 7 and row.wins + row.ties + row.losses == 7
    assert row.wins == sum(qb[q] > qa[q] for q in qa)
    assert math.isclose(row.delta, np.mean([qb[q] - qa[q] for q in qa]))


def test_results_json_is_written_atomically(tmp_path):
    write_json(tmp_path / "x.json", {"a": 1})
    assert json.loads((tmp_path / "x.json").read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]
