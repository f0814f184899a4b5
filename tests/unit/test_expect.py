"""Reproduction bands (``rearank benchmark --expect``): synthetic finished suites checked against the method cards'
published figures and against a figures file, through the CLI's ``--report-only`` path."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchmark import run as suite_run
from benchmark.expect import NO_FIGURE, NOT_RUN, OUTSIDE, WITHIN, check, expected, load_file, published
from benchmark.results import METRICS_FILE, REPORT_FILE, SUITE_FILE, load_suite, write_json
from benchmark.suites import SUITES
from benchmark.tables import load_paper_figures
from rearank.cli import main as rearank_main
from rearank.data import packs
from rearank.errors import RearankError
from tests.unit.test_eval_report import parse_tables


def make_suite(root: Path, model: str | None, scores: dict[str, float], asked: list[str] | None = None,
               first_stage: str | None = None) -> Path:
    """A finished suite folder whose datasets score ``scores`` (nDCG@10 x 100), asked for ``asked``."""
    root.mkdir(parents=True)
    write_json(root / SUITE_FILE, {"datasets": asked or list(scores), "label": "ours", "backend": "vllm",
                                   "model": model, "first_stage": first_stage, "max_queries": None,
                                   "top_k": 100, "skipped": {}})
    for name, score in scores.items():
        (root / name).mkdir()
        per_query = {"q1": {"ndcg_cut_10": score / 100}, "q2": {"ndcg_cut_10": score / 100}}
        metric = {"aggregate": {"ndcg_cut_10": score / 100}, "per_query": per_query}
        write_json(root / name / METRICS_FILE, {"dataset": name, "rerank": metric, "bm25": metric})
    return root


def expect(capsys, out: Path, *flags: str) -> tuple[int, dict[str, dict[str, str]], str]:
    """``benchmark --report-only --expect ...`` on ``out``: exit status, the check's rows by dataset, and stdout
    (stderr when it failed)."""
    code = suite_run.main(["--output-dir", str(out), "--report-only", *flags])
    captured = capsys.readouterr()
    rows = {row["Dataset"]: row for rows in parse_tables(captured.out).values() for row in rows}
    return code, rows, captured.err if code == 2 else captured.out


def test_a_suite_within_the_published_band_passes(tmp_path, capsys):
    out = make_suite(tmp_path / "run", "le723z/Rearank-7B", {"dl19": 74.50, "dl20": 69.20})
    code, rows, text = expect(capsys, out, "--expect", "published")
    assert code == 0
    assert rows["dl19"] == {"Dataset": "dl19", "Measured": "74.50", "Published": "74.16", "Delta": "+0.34",
                            "Verdict": WITHIN}
    assert (rows["dl20"]["Published"], rows["dl20"]["Delta"], rows["dl20"]["Verdict"]) == ("70.00", "-0.80", WITHIN)
    assert (out / REPORT_FILE).is_file()  # --report-only rebuilt the report and ran nothing
    assert "against Rearank-7B (Le Zhang, Bo Wang, Xipeng Qiu, Siva Reddy, Aishwarya Agrawal. Rearank: " in text
    assert "EMNLP 2025, arXiv:2505.20046, Tables 1 and 2)" in text
    assert "tolerance ±1 points" in text and text.rstrip().endswith("2 within")


def test_a_suite_outside_the_band_exits_1_and_the_tolerance_widens_it(tmp_path, capsys):
    out = make_suite(tmp_path / "run", "le723z/Rearank-7B", {"dl19": 72.00, "dl20": 70.40})
    code, rows, _ = expect(capsys, out, "--expect", "published")
    assert code == 1
    assert (rows["dl19"]["Delta"], rows["dl19"]["Verdict"]) == ("-2.16", OUTSIDE)
    assert rows["dl20"]["Verdict"] == WITHIN
    code, rows, _ = expect(capsys, out, "--expect", "published", "--tolerance", "2.5")
    assert code == 0 and rows["dl19"]["Verdict"] == WITHIN


def test_rankllm_band_flags_the_shift_of_rank_llm_pr_410(tmp_path, capsys):
    """RankZephyr on DL20: 0.7982 under vLLM 0.24 against RankLLM's 0.8144-0.8201 reproduction range."""
    old = make_suite(tmp_path / "old", "castorini/rank_zephyr_7b_v1_full", {"dl20": 81.97}, first_stage="splade.trec")
    new = make_suite(tmp_path / "new", "castorini/rank_zephyr_7b_v1_full", {"dl20": 79.82}, first_stage="splade.trec")
    code, rows, _ = expect(capsys, old, "--expect", "published")
    assert code == 0 and rows["dl20"] == {"Dataset": "dl20", "Measured": "81.97", "Published": "81.44–82.01",
                                          "Delta": "+0.00", "Verdict": WITHIN}
    code, rows, _ = expect(capsys, new, "--expect", "published")
    assert code == 1 and (rows["dl20"]["Delta"], rows["dl20"]["Verdict"]) == ("-1.62", OUTSIDE)


def test_missing_dataset_is_not_run_and_one_without_a_figure_is_listed_not_failed(tmp_path, capsys):
    out = make_suite(tmp_path / "run", "le723z/Rearank-7B", {"dl19": 74.0, "dl21": 60.0},
                     asked=["dl19", "dl20", "dl21"])
    code, rows, _ = expect(capsys, out, "--expect", "published")
    assert code == 0
    assert [rows[d]["Verdict"] for d in ("dl19", "dl20", "dl21")] == [WITHIN, NOT_RUN, NO_FIGURE]
    assert (rows["dl20"]["Measured"], rows["dl21"]["Measured"], rows["dl21"]["Published"]) == ("—", "60.00", "—")


def test_suite_average_needs_all_its_datasets(tmp_path):
    bright = {name: 36.0 for name in SUITES["bright"]}
    suite = load_suite(make_suite(tmp_path / "all", "liuwenhan/reasonrank-7B", bright))
    lines = {line.dataset: line for line in check(suite, expected("published", suite.config["model"]))}
    assert lines["bright"].measured == pytest.approx(36.0) and lines["bright"].verdict == WITHIN
    assert lines["bright-aops"].verdict == OUTSIDE  # 36.0 against the paper's 7.68
    partial = dict(list(bright.items())[:5])
    suite = load_suite(make_suite(tmp_path / "part", "liuwenhan/reasonrank-7B", partial, asked=list(SUITES["bright"])))
    lines = {line.dataset: line for line in check(suite, expected("published", "ReasonRank-7B"))}
    assert (lines["bright"].verdict, lines["bright"].note) == (NOT_RUN, "5/12 datasets finished")


def test_unknown_model_is_a_one_line_error_listing_the_known_ones(tmp_path, capsys):
    out = make_suite(tmp_path / "run", "Qwen/Qwen2.5-7B-Instruct", {"dl19": 70.0})
    code, _, err = expect(capsys, out, "--expect", "published")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "model 'Qwen/Qwen2.5-7B-Instruct'" in err
    for name in ("Rearank-7B (le723z/Rearank-7B)", "ReasonRank-7B", "GroupRank-7B", "RankZephyr-7B"):
        assert name in err
    assert "--expect-model" in err
    code, rows, _ = expect(capsys, out, "--expect", "published", "--expect-model", "rearank-7b")
    assert code == 1 and rows["dl19"]["Verdict"] == OUTSIDE


def test_a_local_folder_of_the_checkpoints_name_matches_it(tmp_path):
    assert expected("published", "/ckpts/Rearank-7B/").name == "Rearank-7B"
    assert expected("published", "AQ-MedAI/Diver-GroupRank-32B").name == "GroupRank-32B"
    with pytest.raises(RearankError, match="none recorded"):
        expected("published", None)


def test_a_custom_figures_file(tmp_path, capsys):
    figures = tmp_path / "ours.json"
    figures.write_text(json.dumps({"checkpoints": [
        {"name": "baseline", "figures": {"dl19": 50.0}},
        {"name": "mine", "model": "org/mine-7b", "citation": "our run of 2026-01-05",
         "figures": {"dl19": [60.0, 62.0], "dl20": 58.0, "trec-dl": 60.0}}]}))
    out = make_suite(tmp_path / "run", "/models/mine-7b", {"dl19": 62.5, "dl20": 56.5})
    code, rows, _ = expect(capsys, out, "--expect", str(figures))
    assert code == 1
    assert (rows["dl19"]["Published"], rows["dl19"]["Delta"], rows["dl19"]["Verdict"]) == ("60.00–62.00", "+0.50",
                                                                                            WITHIN)
    assert (rows["dl20"]["Delta"], rows["dl20"]["Verdict"]) == ("-1.50", OUTSIDE)
    assert (rows["trec-dl"]["Measured"], rows["trec-dl"]["Verdict"]) == ("59.50", f"{WITHIN} (mean of 2)")
    code, _, err = expect(capsys, out, "--expect", str(figures), "--expect-model", "nobody")
    assert code == 2 and "known: baseline, mine (org/mine-7b)" in err


@pytest.mark.parametrize("text, message", [
    ("{bad", ":1: not valid JSON"),
    ('{"name": "x", "figures": {"dl19": "high"}}', "checkpoint 'x', dl19: 'high' is not a number"),
    ('{"name": "x", "figures": {"dl19": [3, 2]}}', "band 3.0-2.0 has its ends reversed"),
    ('{"name": "x", "figures": {"dl-19": 70}}', "checkpoint 'x': unknown dataset 'dl-19'; give a pack name"),
    ('{"figures": {"dl19": 3}}', 'checkpoint 1: expected an object with a "name" string'),
    ("[]", 'expected an object with "name" and "figures"'),
])
def test_a_malformed_figures_file_names_the_file(tmp_path, text, message):
    path = tmp_path / "figures.json"
    path.write_text(text)
    with pytest.raises(RearankError, match=str(path)) as err:
        load_file(path)
    assert message in str(err.value)


def test_the_rearank_face_checks_and_refuses_bad_combinations(tmp_path, capsys):
    out = make_suite(tmp_path / "run", "le723z/Rearank-7B", {"dl19": 80.0})
    assert rearank_main(["benchmark", "--expect", "published", "--output-dir", str(out), "--report-only"]) == 1
    assert "| dl19 | 80.00 | 74.16 | +5.84 | outside |" in capsys.readouterr().out
    assert rearank_main(["benchmark", "--expect-model", "Rearank-7B", "--output-dir", str(out),
                         "--report-only"]) == 2
    assert "give --expect published|FILE too" in capsys.readouterr().err
    for tolerance in ("-1", "nan"):
        assert rearank_main(["benchmark", "--expect", "published", "--output-dir", str(out), "--report-only",
                             "--tolerance", tolerance]) == 2
        assert "--tolerance must be a number of points >= 0" in capsys.readouterr().err
    assert rearank_main(["benchmark", "--output-dir", str(tmp_path / "new")]) == 2
    assert "--suite is required" in capsys.readouterr().err
    assert rearank_main(["benchmark", "--output-dir", str(tmp_path / "none"), "--report-only"]) == 2
    assert "not a suite result folder" in capsys.readouterr().err
    assert not list(tmp_path.glob("*none*"))  # refused before taking the folder's lock: nothing written


def test_card_figures_are_the_papers_tables():
    """The cards' Rearank-7B and GroupRank figures agree with the report's copies of the same tables."""
    cards = {c.name: {f.dataset: f.low for f in c.figures} for c in published()}
    paper = load_paper_figures()["tables"]
    for table in ("table1", "table2"):
        row = next(r for r in paper[table]["rows"] if r["model"] == "Rearank-7B")
        for dataset, value in {**row["values"], **row["averages"]}.items():
            assert cards["Rearank-7B"][dataset] == value, dataset
    grouprank = json.loads((Path(__file__).parents[2] / "benchmark/paper_figures_grouprank.json").read_text())
    for table, suite in (("table1_bright", "bright"), ("table2_r2med", "r2med")):
        columns = grouprank["tables"][table]["columns"]
        for size in ("7B", "32B"):
            values = grouprank["tables"][table]["rows"][f"GroupRank-{size}"]
            for column, value in zip(columns, values, strict=True):
                assert cards[f"GroupRank-{size}"][suite if column == "avg" else column] == value, column
    assert cards["ReasonRank-7B"]["bright"] == 35.74
    for checkpoint in published():  # each cited in full: a paper by its arXiv id and table, or RankLLM's log
        assert all(f.dataset in packs.REGISTRY or f.dataset in SUITES for f in checkpoint.figures), checkpoint.name
        assert re.search(r"\. .+\. .*arXiv:\d{4}\.\d{5}, Tables? |github\.com/castorini/rank_llm/pull/\d+",
                         checkpoint.citation), checkpoint.citation
    assert sum(v for d, v in cards["ReasonRank-7B"].items() if d != "bright") / 12 == pytest.approx(35.74, abs=0.005)
