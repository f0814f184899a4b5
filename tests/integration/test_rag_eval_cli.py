"""`rearank rag eval` on the shared HotpotQA dev sample, with the gold reader."""

from __future__ import annotations

import json

import pytest

from rearank.cli import main
from rearank.io.qa import load_qa
from rearank.measures.answers import answer_recall
from tests.conftest import require_pack

DEV = "hotpotqa/dev_distractor.first103.json"


def records(folder):
    return [json.loads(line) for line in (folder / "items.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("selector", ["oracle", "none"])
def test_oracle_reader_em_is_one_exactly_where_support_is_in_top_k(tmp_path, selector, capsys):
    data = require_pack("qa") / DEV
    out = tmp_path / selector
    code = main(["rag", "eval", "--data", str(data), "--selector", selector, "--reader", "gold",
                 "-R", "require=all", "--k", "1,2,3", "--output-dir", str(out), "--no-progress"])
    assert code == 0
    rows = records(out)
    assert len(rows) == 103
    for row in rows:
        for k in ("1", "2", "3"):
            r = row["k"][k]
            all_in = set(row["supporting"]) <= set(r["passages"])
            assert r["em"] == (1.0 if all_in else 0.0), (row["qid"], k)
    metrics = json.loads((out / "metrics.json").read_text())
    if selector == "oracle":  # every HotpotQA record has exactly 2 supporting paragraphs among its candidates
        assert metrics["k"]["2"]["em"] == 1.0 and metrics["k"]["1"]["em"] == 0.0
    # the table of docs/rag.md (103 questions): EM and answer recall per k, as counts of questions
    table = {"oracle": {"1": (0, 53), "2": (103, 91)}, "none": {"1": (0, 14), "2": (1, 22), "3": (8, 33)}}[selector]
    for k, (em, recall) in table.items():
        assert (round(metrics["k"][k]["em"] * 103), round(metrics["k"][k]["answer_recall"] * 103)) == (em, recall), k
    assert "RRPO paper, hotpotqa" in capsys.readouterr().out


def test_none_selector_gives_answer_recall_of_the_given_order(tmp_path):
    data = require_pack("qa") / DEV
    out = tmp_path / "none"
    assert main(["rag", "eval", "--data", str(data), "--selector", "none", "--k", "3", "--output-dir", str(out),
                 "--no-progress"]) == 0
    items = load_qa(data)
    expected = sum(answer_recall([p.text for p in i.passages[:3]], i.answers, 3) for i in items)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["k"]["3"]["answer_recall"] == pytest.approx(expected / len(items))
    # first record (Scott Derrickson / Ed Wood, answer "yes"): "yes" is in none of the first 3 paragraphs
    assert records(out)[0]["k"]["3"]["answer_recall"] == 0.0
    assert [r["ranking"] for r in records(out)[:1]] == [[p.pid for p in items[0].passages]]


def test_resume_and_bad_input_errors(tmp_path, capsys):
    data = require_pack("qa") / DEV
    out = tmp_path / "r"
    args = ["rag", "eval", "--data", str(data), "--limit", "5", "--k", "2", "--output-dir", str(out), "--no-progress"]
    assert main(args) == 0
    assert main(args) == 2 and "pass --resume" in capsys.readouterr().err
    assert main([*args, "--resume"]) == 0 and "5 of 5 questions already" in capsys.readouterr().err
    assert main(["rag", "eval", "--data", str(data), "--k", "0", "--output-dir", str(tmp_path / "x")]) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "answers": ["a"]}\n{"question": 3}\n')
    assert main(["rag", "eval", "--data", str(bad), "--output-dir", str(tmp_path / "y")]) == 2
    assert "bad.jsonl:2:" in capsys.readouterr().err


def test_bm25_selector_ranks_each_items_own_passages(tmp_path):
    data = require_pack("qa") / DEV
    runs = {}
    for selector in ("bm25", "none"):
        out = tmp_path / selector
        assert main(["rag", "eval", "--data", str(data), "--limit", "40", "--selector", selector, "--k", "3",
                     "--output-dir", str(out), "--no-progress"]) == 0
        runs[selector] = json.loads((out / "metrics.json").read_text())["k"]["3"]
        rows = records(out)
        assert all(sorted(r["ranking"], key=int) == [str(i) for i in range(len(r["ranking"]))] for r in rows)
    # the distractor paragraphs come in an arbitrary order: BM25 of the question puts more gold ones on top
    assert runs["bm25"]["support_recall"] > runs["none"]["support_recall"]
