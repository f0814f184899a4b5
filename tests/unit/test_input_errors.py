"""One input-opening path: BOMs stripped, OS errors and deep nesting as one-line errors naming the file."""

from __future__ import annotations

import builtins
import json

import pytest

from rearank.data.packs import load_qrels
from rearank.errors import FormatError, RearankError
from rearank.io import files, trec
from rearank.io.requests_jsonl import read_requests
from rearank.measures.ir import evaluate

BOM = "\ufeff"


def test_bom_does_not_become_part_of_the_first_qid(tmp_path):
    run, qrels = tmp_path / "run.trec", tmp_path / "qrels.txt"
    run.write_text(BOM + "q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1.0 t\n", encoding="utf-8")
    qrels.write_text(BOM + "q1 0 d2 1\n", encoding="utf-8")
    assert list(trec.read_run(run)) == ["q1"] and list(load_qrels(qrels)) == ["q1"]
    # d2 relevant at rank 2: nDCG@10 = (1/log2(3)) / 1 = 0.6309; with the BOM glued on, q1 would score 0
    value = evaluate(load_qrels(qrels), trec.read_run(run), ["nDCG@10"]).aggregate["ndcg_cut_10"]
    assert value == pytest.approx(1 / 1.5849625007211562)


def test_bom_in_a_jsonl_file(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(BOM + json.dumps({"query": {"qid": "q", "text": "t"}, "candidates": []}) + "\n", encoding="utf-8")
    assert read_requests(path)[0].query.qid == "q"


def test_unreadable_file_is_one_line_naming_it(tmp_path, monkeypatch):
    path = tmp_path / "run.trec"
    path.write_text("q1 Q0 d1 1 1.0 t\n")

    def denied(file, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(file))

    monkeypatch.setattr(builtins, "open", denied)  # root ignores chmod, so the OS error is simulated
    with pytest.raises(RearankError, match=rf"^{path}: cannot read \(Permission denied\)$"):
        trec.read_run(path)


def test_a_folder_given_as_a_file_says_so(tmp_path):
    with pytest.raises(FormatError, match="is a folder, expected a file"):
        trec.read_run(tmp_path)


def test_deeply_nested_json_line_is_a_format_error(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(FormatError, match=rf"{path}:1: (JSON nested too deeply|invalid JSON)"):
        read_requests(path)


def test_deep_yaml_is_one_line():
    with pytest.raises(RearankError, match="x: YAML nested too deeply"):
        files.parse_yaml("[" * 5000 + "]" * 5000, "x")


def test_qrels_without_judgments_name_the_file(tmp_path):
    path = tmp_path / "empty.qrels"
    path.write_text("\n")
    with pytest.raises(RearankError, match=f"{path}: the qrels hold no judgments"):
        load_qrels(path)


def test_duplicate_docids_in_a_request_keep_the_first(tmp_path, caplog):
    path = tmp_path / "r.jsonl"
    cands = [{"docid": "a", "score": 3, "doc": "x"}, {"docid": "b", "score": 2, "doc": "y"},
             {"docid": "a", "score": 1, "doc": "z"}]
    path.write_text(json.dumps({"query": {"qid": "q", "text": "t"}, "candidates": cands}) + "\n")
    [request] = read_requests(path)
    assert [(c.docid, c.text) for c in request.candidates] == [("a", "x"), ("b", "y")]
    assert "1 repeated candidate docids" in caplog.text


def test_full_disk_is_one_line_and_leaves_the_target(tmp_path, monkeypatch):
    target = tmp_path / "out.trec"
    target.write_text("old\n")
    full = r"cannot write \(No space left on device\); .* is unchanged$"
    with pytest.raises(RearankError, match=full) as err, files.atomic_write(target) as handle:
        handle.write("new\n")
        raise OSError(28, "No space left on device")
    assert err.value.__cause__ is None and err.value.__suppress_context__
    assert target.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["out.trec"]


def test_deep_yaml_template_is_one_line(tmp_path):
    from rearank.methods.templates import load_template

    path = tmp_path / "deep.yaml"
    path.write_text("system: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(FormatError, match="YAML nested too deeply|invalid YAML"):
        load_template(path)


@pytest.mark.parametrize("measure", ["P@0", "P.0", "ndcg_cut.0", "nDCG@0"])
def test_a_zero_cutoff_is_refused_before_pytrec_eval_aborts(tmp_path, measure):
    """pytrec_eval kills the interpreter (SIGABRT) on a cutoff of 0: run the CLI in a subprocess to see it live."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    run, qrels = tmp_path / "run.trec", tmp_path / "qrels.txt"
    run.write_text("q1 Q0 d1 1 2.0 t\n")
    qrels.write_text("q1 0 d1 1\n")
    done = subprocess.run([sys.executable, "-m", "rearank", "eval", "--qrels", str(qrels), "--run", str(run),
                           "-m", measure], check=False, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2, done.stderr
    assert "the cutoff must be a whole number of at least 1" in done.stderr and "Traceback" not in done.stderr
