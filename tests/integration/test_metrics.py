"""Metrics on the real packs: published BM25 figures, the real trec_eval's figures (stored), trec_eval -c, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rearank.errors import RearankError
from rearank.io.trec import read_qrels, read_run, write_run
from rearank.measures.ir import DEFAULT_MEASURES, evaluate, parse_measures, trec_name

# pack folder fixture name, qrels file, run file, published BM25 nDCG@10 (README of the shared packs)
PACKS = [
    ("dl19", "qrels.txt", "run.bm25.top100.trec", 0.5058),
    ("dl21", "qrels.txt", "run.bm25.top100.trec", 0.4458),
    ("scifact", "qrels.test.trec", "run.bm25-flat.top100.trec", 0.6789),
]


@pytest.mark.parametrize("fixture,qrels,run,expected", PACKS)
def test_bm25_ndcg10_matches_published(request: pytest.FixtureRequest, fixture: str, qrels: str, run: str,
                                       expected: float) -> None:
    folder: Path = request.getfixturevalue(fixture)
    result = evaluate(read_qrels(folder / qrels), read_run(folder / run))
    assert round(result.aggregate["ndcg_cut_10"], 4) == expected
    assert set(result.aggregate) == {"ndcg_cut_1", "ndcg_cut_5", "ndcg_cut_10", "recall_100", "map_cut_100"}


#: Figures printed by the real NIST trec_eval 9.0.4 on the same runs (tests/fixtures/make_trec_eval_fixtures.py).
TREC_EVAL = json.loads((Path(__file__).parents[1] / "fixtures" / "trec_eval_dl19.json").read_text())["cases"]


def assert_trec_eval(ours, case: str) -> None:
    """Every figure trec_eval printed for ``case`` (per query and 'all'), to its 4 printed decimals."""
    for qid, values in TREC_EVAL[case]["values"].items():
        mine = ours.aggregate if qid == "all" else ours.per_query[qid]
        for key, value in values.items():
            assert mine[key] == pytest.approx(value, abs=5e-5), (case, qid, key)


def test_agrees_with_trec_eval_per_query(dl19: Path) -> None:
    qrels = read_qrels(dl19 / "qrels.txt")
    run = read_run(dl19 / "run.bm25.top100.trec")
    names = ["ndcg_cut.1,5,10", "recall.100", "map_cut.100", "map", "recip_rank", "P.10", "bpref", "ndcg"]
    ours = evaluate(qrels, run, parse_measures(names))
    assert set(ours.per_query) | {"all"} == set(TREC_EVAL["bm25"]["values"])
    assert_trec_eval(ours, "bm25")


def test_ties_are_broken_as_trec_eval_does(dl19: Path) -> None:
    """Scores rounded to whole numbers create many ties; trec_eval breaks them by docid, as we must."""
    qrels = read_qrels(dl19 / "qrels.txt")
    run = {q: [(d, float(round(s))) for d, s in r] for q, r in read_run(dl19 / "run.bm25.top100.trec").items()}
    assert_trec_eval(evaluate(qrels, run, parse_measures(["ndcg_cut.10"])), "bm25_rounded_scores")


def test_judged_queries_missing_from_run_count_zero(dl19: Path) -> None:
    """trec_eval -c: the 33 judged queries absent from the run count 0 in the means."""
    qrels = read_qrels(dl19 / "qrels.txt")
    full = read_run(dl19 / "run.bm25.top100.trec")
    kept = dict(list(full.items())[:10])
    kept["not-judged"] = [("x", 1.0)]
    part = evaluate(qrels, kept)
    assert len(part.per_query) == len(qrels) == 43
    assert len(part.missing) == 33 and part.unjudged == 1
    assert all(part.per_query[q]["ndcg_cut_10"] == 0.0 for q in part.missing)
    assert_trec_eval(part, "first10_and_unjudged_c")


def test_measure_names_in_both_styles() -> None:
    for trec_style, ir_style, key in [("ndcg_cut.10", "nDCG@10", "ndcg_cut_10"), ("recall.100", "R@100", "recall_100"),
                                      ("map_cut.100", "AP@100", "map_cut_100"), ("P.5", "P@5", "P_5"),
                                      ("recip_rank", "RR", "recip_rank"), ("ndcg_cut_10", "nDCG@10", "ndcg_cut_10")]:
        assert parse_measures([trec_style]) == parse_measures([ir_style])
        assert trec_name(parse_measures([ir_style])[0]) == key
    assert [trec_name(m) for m in DEFAULT_MEASURES] == ["ndcg_cut_1", "ndcg_cut_5", "ndcg_cut_10", "recall_100",
                                                          "map_cut_100"]
    assert [trec_name(m) for m in parse_measures(["ndcg_cut.1,5,10,RR@10"])] == [
        "ndcg_cut_1", "ndcg_cut_5", "ndcg_cut_10", "RR@10"]
    with pytest.raises(RearankError, match="unknown measure 'ndcg_at_ten'"):
        parse_measures(["ndcg_at_ten"])


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rearank", *args], capture_output=True, text=True, check=False)


def test_cli_json_and_table(scifact: Path) -> None:
    run = str(scifact / "run.bm25-flat.top100.trec")
    out = _cli("eval", "--qrels", str(scifact / "qrels" / "test.tsv"), "--run", run, "-m", "ndcg_cut.10",
               "-m", "nDCG@5,recall.100", "--format", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert set(data) == {"ndcg_cut_10", "ndcg_cut_5", "recall_100", "per_query"}
    assert round(data["ndcg_cut_10"], 4) == 0.6789
    assert len(data["per_query"]) == 300
    table = _cli("eval", "--qrels", str(scifact / "qrels.test.trec"), "--run", run)
    assert table.returncode == 0, table.stderr
    assert any(line.split() == ["ndcg_cut_10", "0.6789"] for line in table.stdout.splitlines())


def test_cli_dataset_qrels(dl19: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REARANK_DATA", str(dl19.parents[1]))
    out = _cli("eval", "--dataset", "dl19", "--run", str(dl19 / "run.bm25.top100.trec"), "-m", "nDCG@10",
               "--format", "json")
    assert out.returncode == 0, out.stderr
    assert round(json.loads(out.stdout)["ndcg_cut_10"], 4) == 0.5058


def test_cli_errors_are_one_line(tmp_path: Path, dl19: Path) -> None:
    bad = tmp_path / "bad.trec"
    bad.write_text("q1 Q0 d1 1 0.5 t\nq1 Q0 d2 two 0.4 t\n")
    out = _cli("eval", "--qrels", str(dl19 / "qrels.txt"), "--run", str(bad))
    assert out.returncode == 2
    assert out.stderr.strip() == f"rearank eval: error: {bad}:2: rank 'two' is not an integer"
    write_run(tmp_path / "ok.trec", {"q": [("d", 1.0)]})
    out = _cli("eval", "--qrels", str(dl19 / "qrels.txt"), "--run", str(tmp_path / "ok.trec"), "-m", "nDCG@ten")
    assert out.returncode == 2 and "unknown measure 'nDCG@ten'" in out.stderr and "Traceback" not in out.stderr
