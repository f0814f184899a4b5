"""`rearank compare` on recorded oracle runs of dl19: what a run records, and the drift report's verdicts."""

from __future__ import annotations

import argparse
import json

import pytest

from rearank.cli import compare as compare_cli
from rearank.cli import main


@pytest.fixture
def dl19_env(dl19, monkeypatch):
    monkeypatch.setenv("REARANK_DATA", str(dl19.parents[1]))
    return dl19


def rerank(out, *flags):
    assert main(["rerank", "--dataset", "dl19", "--backend", "oracle", "--max-queries", "3", "--no-progress",
                 "--output", str(out), *flags]) == 0
    return out


def compare(*argv):
    """``rearank compare`` through its own parser (the entry point is registered once the project is installed)."""
    parser = argparse.ArgumentParser()
    compare_cli.register(parser.add_subparsers())
    args = parser.parse_args(["compare", *map(str, argv)])
    return args.func(args)


@pytest.fixture
def runs(dl19_env, tmp_path):
    return rerank(tmp_path / "a.trec"), rerank(tmp_path / "b.trec")


def traces_of(run):
    path = run.with_name(run.name + ".traces.jsonl")
    return path, [json.loads(line) for line in path.read_text().splitlines()]


def test_a_run_records_what_made_it_and_each_window_its_prompt_digest(runs, capsys):
    a, _ = runs
    made = json.loads(a.with_name("a.trec.stats.json").read_text())["provenance"]
    assert made["versions"]["python"] and made["versions"]["torch"] and made["versions"]["rearank"].startswith("0.")
    assert made["device"]["cpus"] >= 1 and made["backend"] == "oracle"
    assert made["template"]["name"] == "rearank" and len(made["template"]["digest"]) == 16
    assert made["decoding"]["temperature"] == 0.0 and made["decoding"]["max_new_tokens"] > 0
    _, traces = traces_of(a)
    digests = [t["prompt_digest"] for t in traces]
    assert all(len(d) == 16 for d in digests) and len(set(digests)) == len(digests)
    assert main(["eval", "--dataset", "dl19", "--run", str(a)]) == 0
    shown = capsys.readouterr().out
    assert "made with:" in shown
    assert any(line.split() == ["template.digest", made["template"]["digest"]] for line in shown.splitlines())


def test_two_runs_of_the_same_settings_have_no_changed_window(runs, capsys):
    assert compare(*runs, "--tolerance", "0", "--same-prompts", "--same-answers") == 0
    report = capsys.readouterr().out
    assert "windows: 27: 0 prompt changed, 0 answer changed, 0 after an earlier change, 27 same" in report
    assert "environment: the same" in report and "OK: the checks asked for hold" in report


def test_another_template_lists_the_prompt_changed_windows_and_fails_same_prompts(runs, tmp_path, capsys):
    a, _ = runs
    c = rerank(tmp_path / "c.trec", "--template", "rankgpt")
    assert compare(a, c) == 0  # no check asked for
    capsys.readouterr()
    assert compare(a, c, "--same-prompts") == 1
    report = capsys.readouterr().out
    assert "3 prompt changed" in report and "24 after an earlier change" in report
    first = traces_of(a)[1][0]
    assert f"dl19 query {first['qid']} window 0 [80:100]: prompt {first['prompt_digest']} -> " in report
    assert "template.name    rearank | rankgpt" in report and "FAIL: 3 windows were sent another prompt" in report


def test_an_edited_answer_is_an_answer_changed_window(runs, capsys):
    a, b = runs
    path, traces = traces_of(b)
    traces[4]["raw_output"] = "[2] > [1]"
    path.write_text("".join(json.dumps(t) + "\n" for t in traces))
    assert compare(a, b, "--same-prompts") == 0  # the prompts are the same
    capsys.readouterr()
    assert compare(a, b, "--same-answers") == 1
    report = capsys.readouterr().out
    assert "0 prompt changed, 1 answer changed, 0 after an earlier change, 26 same" in report
    assert f"dl19 query {traces[4]['qid']} window 4 " in report and '-> "[2] > [1]"' in report


def test_a_delta_outside_the_tolerance_exits_1(runs, capsys):
    a, b = runs
    lines = b.read_text().splitlines()
    qid = lines[0].split()[0]
    ours = [line.split() for line in lines if line.split()[0] == qid]
    flipped = [" ".join([f[0], f[1], f[2], str(len(ours) - i), str(float(i + 1)), f[5]]) for i, f in enumerate(ours)]
    b.write_text("\n".join(flipped + [line for line in lines if line.split()[0] != qid]) + "\n")
    assert compare(a, b, "--tolerance", "100") == 0
    capsys.readouterr()
    assert compare(a, b, "--tolerance", "0.5") == 1
    report = capsys.readouterr().out
    assert "FAIL: dl19: nDCG@10 delta -" in report and "outside the tolerance 0.5" in report


def test_benchmark_folders_compare_per_dataset(dl19_env, tmp_path, capsys):
    folders = [tmp_path / name for name in ("a", "b")]
    for folder in folders:
        assert main(["benchmark", "--suite", "dl19", "--backend", "oracle", "--max-queries", "2", "--no-progress",
                     "--output-dir", str(folder)]) == 0
    assert "made with versions.python" in (folders[0] / "report.md").read_text()
    capsys.readouterr()
    assert compare(*folders, "--tolerance", "0", "--same-answers") == 0
    report = capsys.readouterr().out
    assert "dl19     2        100.00     100.00     +0.00" in report and "18 same" in report


def test_bad_inputs_are_one_line_errors(runs, tmp_path):
    a, _ = runs
    with pytest.raises(compare_cli.RearankError, match="no such run file"):
        compare(a, tmp_path / "nothing.trec")
    (tmp_path / "lone.trec").write_text(a.read_text())
    with pytest.raises(compare_cli.RearankError, match="no traces beside it"):
        compare(a, tmp_path / "lone.trec")
    with pytest.raises(compare_cli.RearankError, match="--tolerance must be"):
        compare(*runs, "--tolerance", "-1")
