"""A run that failed says so, and nothing finished is overwritten: `rearank rerank` against an unreachable or failing
OpenAI-compatible server exits 2 with one line naming the first cause, counts partial failures, and its resume
retries the failed windows; a second run into the same output is refused without --resume or --overwrite, and a
resume refuses traces that are gone or another run's, and an input with fewer queries than the run."""

from __future__ import annotations

import json
import logging

import pytest

from rearank.cli import main
from rearank.io.requests_jsonl import write_requests
from rearank.types import Candidate, Query, Request
from tests.fault_server import FaultServer

#: 2 queries x 5 candidates, window 3 step 1: 3 windows a query, 6 in all.
QUERIES, CANDIDATES, WINDOWS = 2, 5, 6
UNREACHABLE = "http://127.0.0.1:1/v1"


@pytest.fixture
def requests_file(tmp_path):
    path = tmp_path / "requests.jsonl"
    write_requests(path, [Request(Query(f"q{q}", f"query number {q}"),
                                  tuple(Candidate(f"d{q}_{c}", float(CANDIDATES - c), f"passage {c} of query {q}")
                                        for c in range(CANDIDATES)))
                          for q in range(QUERIES)])
    return path


def rerank(requests_file, base_url, out, *extra):
    """``rearank rerank`` on the server at ``base_url``: no retry, one window in flight (arrival order fixed)."""
    return main(["rerank", "--requests", str(requests_file), "--backend", "openai", "--model", "m",
                 "-O", f"base_url={base_url}", "-O", "max_retries=0", "-O", "timeout_s=5", "-O", "concurrency=1",
                 "--window", "3", "--step", "1", "--no-progress", "--output", str(out), *extra])


def stats_of(out):
    return json.loads(out.with_name(out.name + ".stats.json").read_text())


def last_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return err.strip().splitlines()[-1]


def test_a_run_whose_every_call_failed_exits_2_naming_the_cause(requests_file, tmp_path, capsys, caplog):
    out = tmp_path / "run.trec"
    assert rerank(requests_file, UNREACHABLE, out) == 2
    captured = capsys.readouterr()
    line = captured.err.strip().splitlines()[-1]
    assert line.startswith(f"rearank rerank: error: all {WINDOWS} model calls failed (first: request to "
                           f"{UNREACHABLE}/chat/completions failed (connection error"), line
    assert line.endswith("rerun with --resume to retry them") and "Traceback" not in captured.err
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "Connection refused" in warned[0].getMessage()  # the cause warned about once
    assert f"; {WINDOWS} of {WINDOWS} model calls failed" in captured.out  # the summary line
    stats = stats_of(out)
    assert stats["failed_calls"] == stats["status_counts"]["error"] == WINDOWS
    assert stats["first_error"].startswith(f"request to {UNREACHABLE}/chat/completions failed (connection error")
    traces = [json.loads(line) for line in out.with_name("run.trec.traces.jsonl").read_text().splitlines()]
    assert {t["status"] for t in traces} == {"error"} and all("Connection refused" in t["error"] for t in traces)


def test_a_resume_retries_the_failed_windows(requests_file, tmp_path, capsys):
    clean = tmp_path / "clean.trec"
    with FaultServer() as server:
        assert rerank(requests_file, server.base_url, clean) == 0
    out = tmp_path / "run.trec"
    with FaultServer(faults={i: "500" for i in range(WINDOWS)}) as server:
        assert rerank(requests_file, server.base_url, out) == 2
        assert "all 6 model calls failed (first: request to" in last_error_line(capsys)
        assert rerank(requests_file, server.base_url, out, "--resume") == 0
    assert "resume: 0 of 2 queries already in" in capsys.readouterr().err  # failed queries are not finished
    assert out.read_text() == clean.read_text()
    assert stats_of(out)["failed_calls"] == 0 and stats_of(out)["calls"] == WINDOWS


def test_a_partial_failure_is_counted_and_fails_at_the_share_set(requests_file, tmp_path, capsys):
    out = tmp_path / "run.trec"
    with FaultServer(faults={0: "500"}) as server:
        assert rerank(requests_file, server.base_url, out) == 0  # 1 of 6: under the default share (all)
        assert "; 1 of 6 model calls failed" in capsys.readouterr().out
        assert stats_of(out)["failed_calls"] == 1
        assert rerank(requests_file, server.base_url, out, "--resume", "--fail-share", "0") == 0
        assert "resume: 1 of 2 queries already in" in capsys.readouterr().err  # the failed query is done again
        assert stats_of(out)["failed_calls"] == 0
    other = tmp_path / "other.trec"
    with FaultServer(faults={0: "500"}) as server:
        assert rerank(requests_file, server.base_url, other, "--fail-share", "0") == 2
    assert "error: 1 of 6 model calls failed (first: request to" in last_error_line(capsys)


def test_a_second_run_into_the_same_output_is_refused(requests_file, tmp_path, capsys):
    out = tmp_path / "run.trec"
    with FaultServer() as server:
        assert rerank(requests_file, server.base_url, out) == 0
        before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
        capsys.readouterr()
        assert rerank(requests_file, server.base_url, out) == 2
        assert last_error_line(capsys) == (f"rearank rerank: error: {out} already holds a run; pass --resume to "
                                           "continue it, --overwrite to replace it, or choose another --output")
        assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
        assert rerank(requests_file, server.base_url, out, "--overwrite") == 0
        with pytest.raises(SystemExit):
            rerank(requests_file, server.base_url, out, "--overwrite", "--resume")
    assert "not allowed with argument" in capsys.readouterr().err


@pytest.mark.parametrize("damage", ["deleted", "another run's"])
def test_a_resume_whose_traces_cannot_be_trusted_is_refused(requests_file, tmp_path, capsys, damage):
    out = tmp_path / "run.trec"
    traces = tmp_path / "run.trec.traces.jsonl"
    with FaultServer() as server:
        assert rerank(requests_file, server.base_url, out) == 0
        if damage == "deleted":
            traces.unlink()
            needle = f"{out} holds 2 queries but their traces {traces} are gone"
        else:
            traces.write_text(traces.read_text().replace('"qid": "q', '"qid": "other'))
            needle = f"the traces {traces} hold none of the 2 queries of {out}"
        before = out.read_bytes()
        capsys.readouterr()
        assert rerank(requests_file, server.base_url, out, "--resume") == 2
        line = last_error_line(capsys)
        assert needle in line and "--overwrite" in line, line
        assert out.read_bytes() == before and (damage != "deleted" or not traces.exists())
        assert rerank(requests_file, server.base_url, out, "--overwrite") == 0  # told to start again


def test_a_resume_with_fewer_queries_than_the_run_is_refused(requests_file, tmp_path, capsys):
    out = tmp_path / "run.trec"
    with FaultServer() as server:
        assert rerank(requests_file, server.base_url, out) == 0
        capsys.readouterr()
        assert rerank(requests_file, server.base_url, out, "--resume", "--max-queries", "1") == 2
        assert "holds 1 query the input does not have (first: 'q1'; another --max-queries" in last_error_line(capsys)
        assert rerank(requests_file, server.base_url, out, "--resume") == 0  # the same input still resumes


@pytest.fixture
def dl19_env(dl19, monkeypatch):
    monkeypatch.setenv("REARANK_DATA", str(dl19.parents[1]))
    return dl19


def test_a_suite_that_ran_nothing_exits_2(dl19_env, tmp_path, capsys):
    out = tmp_path / "suite"
    code = main(["benchmark", "--suite", "dl19", "--backend", "oracle", "--max-queries", "2", "--no-progress",
                 "--first-stage", str(tmp_path / "nonexist" / "{dataset}.trec"), "--output-dir", str(out)])
    assert code == 2
    assert last_error_line(capsys) == (f"rearank benchmark: error: no dataset ran (dl19: dataset 'dl19': "
                                       f"--first-stage run {tmp_path / 'nonexist' / 'dl19.trec'} not found)")


def test_a_suite_whose_calls_all_failed_exits_2_and_its_resume_reruns_the_dataset(dl19_env, tmp_path, capsys):
    argv = ["benchmark", "--suite", "dl19", "--backend", "openai", "--model", "m", "-O", f"base_url={UNREACHABLE}",
            "-O", "max_retries=0", "--max-queries", "1", "--top-k", "4", "--window", "3", "--step", "1",
            "--no-progress", "--output-dir", str(tmp_path / "suite")]
    assert main(argv) == 2
    line = last_error_line(capsys)
    assert line.startswith("rearank benchmark: error: dl19: all 2 model calls failed (first: request to "), line
    assert main([*argv, "--resume"]) == 2
    err = capsys.readouterr().err
    assert "done earlier, kept" not in err and "resume: 0 of 1 queries already in" in err


def test_a_rag_evaluation_whose_reads_all_failed_exits_2_and_its_resume_reads_them_again(tmp_path, capsys):
    from tests.conftest import require_pack

    argv = ["rag", "eval", "--data", str(require_pack("qa") / "hotpotqa/dev_distractor.first103.json"),
            "--limit", "2", "--k", "1,2", "--reader", "openai", "--reader-model", "m", "-R", f"base_url={UNREACHABLE}",
            "-R", "max_retries=0", "--output-dir", str(tmp_path / "rag"), "--no-progress"]
    assert main(argv) == 2
    line = last_error_line(capsys)
    assert line.startswith(f"rearank rag: error: all 4 reads failed (first: request to {UNREACHABLE}/chat/"), line
    assert line.endswith("rerun with --resume to read them again")
    assert main([*argv, "--resume"]) == 2
    assert "resume: 0 of 2 questions already in" in capsys.readouterr().err
