"""`rearank rerank` never loses or mixes work: the output guard, the lock, and a resume that checks what it keeps."""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter

import pytest

from rearank.cli import main
from rearank.errors import RearankError
from rearank.io.outputs import exclusive

ARGS = ["rerank", "--dataset", "dl19", "--backend", "oracle", "--max-queries", "6", "--batch-size", "2",
        "--no-progress"]
STATS_KEYS = ("queries", "calls", "prompt_tokens", "completion_tokens", "status_counts")


@pytest.fixture
def dl19_env(dl19, monkeypatch):
    monkeypatch.setenv("REARANK_DATA", str(dl19.parents[1]))
    return dl19


@pytest.fixture
def full(dl19_env, tmp_path):
    """An uninterrupted run: (run text, traces multiset, stats figures)."""
    out = tmp_path / "full" / "run.trec"
    assert main([*ARGS, "--output", str(out)]) == 0
    return outputs(out)


def windows(traces_path) -> Counter:
    """Traces as a multiset of windows, latency aside."""
    records = [json.loads(line) for line in traces_path.read_text().splitlines()]
    return Counter(json.dumps({k: v for k, v in r.items() if k != "latency_s"}, sort_keys=True) for r in records)


def outputs(out):
    stats = json.loads(out.with_name(out.name + ".stats.json").read_text())
    return (sorted(out.read_text().splitlines()), windows(out.with_name(out.name + ".traces.jsonl")),
            {k: stats[k] for k in STATS_KEYS})


def one_line_error(capsys, code, needle):
    err = capsys.readouterr().err
    assert code == 2 and needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_output_equal_to_the_input_run_is_refused(dl19, tmp_path, capsys):
    run = tmp_path / "in.trec"
    run.write_bytes((dl19 / "run.bm25.top100.trec").read_bytes())
    before = run.read_bytes()
    code = main(["rerank", "--run", str(run), "--topics", str(dl19 / "topics.tsv"), "--docs", str(dl19 / "docs.tsv"),
                 "--qrels", str(dl19 / "qrels.txt"), "--backend", "oracle", "--no-progress", "--resume",
                 "--output", str(tmp_path / "." / "in.trec")])
    one_line_error(capsys, code, "is the input --run")
    assert run.read_bytes() == before


@pytest.mark.parametrize(("output", "name"), [("qrels.txt", "qrels"), ("run.bm25.top100.trec", "run"),
                                              ("run.trec.traces.jsonl", "run")])
def test_an_output_onto_a_file_of_the_dataset_pack_is_refused(dl19, tmp_path, monkeypatch, capsys, output, name):
    """``--dataset`` reads the pack's files: no output (given, or implied like the traces) may be one of them."""
    pack = tmp_path / "msmarco-v1-passage" / "dl19"
    shutil.copytree(dl19, pack)
    (pack / "run.trec.traces.jsonl").symlink_to(pack / "run.bm25.top100.trec")
    monkeypatch.setenv("REARANK_DATA", str(tmp_path))
    before = {p.name: p.read_bytes() for p in pack.iterdir()}
    target = pack / (output if output != "run.trec.traces.jsonl" else "run.trec")
    code = main([*ARGS, "--output", str(target)])
    one_line_error(capsys, code, f"is the input the dl19 pack's {name};")
    assert {p.name: p.read_bytes() for p in pack.iterdir()} == before


def test_traces_equal_to_output_is_refused(dl19_env, tmp_path, capsys):
    out = tmp_path / "run.trec"
    one_line_error(capsys, main([*ARGS, "--output", str(out), "--traces", str(out)]), "are the same file")
    assert not out.exists()


def test_a_second_writer_of_the_same_output_is_refused(dl19_env, tmp_path, capsys):
    out = tmp_path / "run.trec"
    with exclusive(out):  # another process would hold this lock while it writes
        one_line_error(capsys, main([*ARGS, "--output", str(out)]), "another process is writing it")
    assert not out.exists()
    assert main([*ARGS, "--output", str(out)]) == 0  # released: now it runs


def test_unwritable_traces_place_leaves_the_existing_run(dl19_env, tmp_path, capsys):
    out = tmp_path / "run.trec"
    out.write_text("q Q0 d 1 1.0 earlier\n")
    blocker = tmp_path / "file"
    blocker.write_text("")
    code = main([*ARGS, "--output", str(out), "--traces", str(blocker / "traces.jsonl"), "--overwrite"])
    one_line_error(capsys, code, "cannot write")
    assert out.read_text() == "q Q0 d 1 1.0 earlier\n"


def test_resume_with_other_settings_is_refused(dl19_env, tmp_path, capsys, full):
    out = tmp_path / "run.trec"
    assert main([*ARGS, "--output", str(out)]) == 0
    before = out.read_text()
    one_line_error(capsys, main([*ARGS, "--output", str(out), "--resume", "--window", "10", "--step", "5"]),
                   "was made with other settings (step: 10 -> 5, window: 20 -> 10)")
    assert out.read_text() == before
    out.with_name("run.trec.stats.json").unlink()
    one_line_error(capsys, main([*ARGS, "--output", str(out), "--resume"]), "missing or unreadable")


def test_resume_reruns_queries_whose_traces_were_cut_and_stats_match(dl19_env, tmp_path, capsys, full):
    out = tmp_path / "run.trec"
    assert main([*ARGS, "--output", str(out)]) == 0
    traces = tmp_path / "run.trec.traces.jsonl"
    lines = traces.read_text().splitlines()
    traces.write_text("\n".join(lines[:-3]) + "\n" + lines[-3][:40])  # cut inside a line, 3 windows short
    assert main([*ARGS, "--output", str(out), "--resume"]) == 0
    assert "resume: 5 of 6 queries" in capsys.readouterr().err
    assert outputs(out) == full


def test_truncated_last_run_line_is_not_a_finished_query(dl19_env, tmp_path, capsys, full):
    out = tmp_path / "run.trec"
    assert main([*ARGS, "--output", str(out)]) == 0
    text = out.read_text()
    out.write_text(text[: text.rindex("\n", 0, len(text) - 1) + 12])  # the last line cut after 11 characters
    assert main([*ARGS, "--output", str(out), "--resume"]) == 0
    assert "resume: 5 of 6 queries" in capsys.readouterr().err
    assert outputs(out) == full  # the stats count all 6 queries, as an uninterrupted run's do


def test_empty_input_and_requests_named_txt(dl19_env, tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    code = main(["rerank", "--requests", str(empty), "--qrels", str(dl19_env / "qrels.txt"), "--backend", "oracle",
                 "--output", str(tmp_path / "o.trec")])
    one_line_error(capsys, code, "no query to rerank")
    txt = tmp_path / "x.txt"
    txt.write_text("not json\n")
    code = main(["rerank", "--requests", str(txt), "--backend", "oracle", "--output", str(tmp_path / "o.trec")])
    one_line_error(capsys, code, f"{txt}:1: invalid JSON")


def test_folder_as_run_says_folder(dl19_env, tmp_path, capsys):
    code = main(["rerank", "--run", str(tmp_path), "--topics", str(dl19_env / "topics.tsv"), "--docs",
                 str(dl19_env / "docs.tsv"), "--backend", "oracle", "--output", str(tmp_path / "o.trec")])
    one_line_error(capsys, code, "is a folder, expected a file")


def test_no_lock_file_is_left_beside_a_finished_run_and_the_lock_still_excludes(dl19_env, tmp_path):
    # a .run.trec.lock was left beside every finished run
    out = tmp_path / "run.trec"
    assert main([*ARGS, "--output", str(out)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.trec", "run.trec.stats.json", "run.trec.traces.jsonl"]
    lock = tmp_path / ".run.trec.lock"
    with exclusive(out):
        assert lock.is_file()
        with pytest.raises(RearankError, match="another process is writing it"), exclusive(out):
            pass
    assert not lock.exists()


def test_a_writer_that_opened_the_lock_before_its_holder_removed_it_does_not_share_the_lock(tmp_path, monkeypatch):
    """Removing the lock file at the end must not let two writers hold it: B opened the old file just before A
    removed it, and locks it after C took the new one at the path; B must find its file is no longer the lock."""
    from rearank.io import outputs

    out = tmp_path / "run.trec"
    with exclusive(out):  # A
        stale = os.open(tmp_path / ".run.trec.lock", os.O_RDWR)  # B got this far before A finished
    opened = [stale]
    real_open = outputs._open_lock
    monkeypatch.setattr(outputs, "_open_lock", lambda path, lock: opened.pop() if opened else real_open(path, lock))
    # C holds the lock file now at the path; B is refused
    with exclusive(out), pytest.raises(RearankError, match="another process is writing it"), exclusive(out):
        pass
    with exclusive(out):  # and once C is done, B's next try gets it
        pass
