"""Real kills: `rearank rerank` and `rearank benchmark` in a subprocess, SIGKILLed at several moments, resumed.

The model is the deterministic fault server on 127.0.0.1 (its answer depends on the prompt only), so a resumed
run must equal an uninterrupted one: the run, the traces as a multiset of windows and the stats figures
(queries, calls, tokens, statuses; wall time aside). The server holds request number K until the test has
killed the client, which pins the moment of the kill.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter

import pytest

from rearank.io.requests_jsonl import write_requests
from rearank.types import Candidate, Query, Request
from tests.conftest import ROOT
from tests.fault_server import FaultServer

SENTINEL = "sk-sentinel-kill-7c1d2e3f4a5b"
STATS_KEYS = ("queries", "calls", "prompt_tokens", "completion_tokens", "status_counts")
#: 9 queries x 25 candidates, window 10 step 5: schedule(25, 10, 5) = (15,25) (10,20) (5,15) (0,10) -> 4 windows
#: per query, 36 in all.
QUERIES, CANDIDATES, WINDOWS_PER_QUERY = 9, 25, 4


@pytest.fixture(scope="module")
def requests_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("kill") / "requests.jsonl"
    requests = [Request(Query(f"q{q}", f"query number {q}"),
                        tuple(Candidate(f"d{q}_{c}", float(CANDIDATES - c), f"passage {c} of query {q}")
                              for c in range(CANDIDATES)))
                for q in range(QUERIES)]
    write_requests(path, requests)
    return path


def rerank_cmd(requests_file, server, out, *extra):
    return [sys.executable, "-m", "rearank", "rerank", "--requests", str(requests_file), "--backend", "openai",
            "--model", "m", "-O", f"base_url={server.base_url}", "-O", "max_retries=0", "-O", "concurrency=3",
            "--window", "10", "--step", "5", "--batch-size", "3", "--no-progress", "--output", str(out), *extra]


def env():
    return {**os.environ, "OPENAI_API_KEY": SENTINEL, "PYTHONPATH": str(ROOT)}


def finish(cmd):
    done = subprocess.run(cmd, check=False, env=env(), capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done


def kill_at(cmd, server, timeout=60):
    """Start ``cmd``, wait until the server holds its K-th request (the client is then alive and waiting for the
    answer), SIGKILL it and check it died by that signal; return its stderr."""
    proc = subprocess.Popen(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    try:
        assert server.gate_reached.wait(timeout), "the client never reached the gate"
        assert proc.poll() is None, "the client exited while the server held its request"  # alive, mid-work
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    return err.decode()


def windows(path) -> Counter:
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return Counter(json.dumps({k: v for k, v in r.items() if k != "latency_s"}, sort_keys=True) for r in records)


def outputs(out, stats_path=None, traces=None):
    stats = json.loads((stats_path or out.with_name(out.name + ".stats.json")).read_text())
    return (sorted(out.read_text().splitlines()), windows(traces or out.with_name(out.name + ".traces.jsonl")),
            {k: stats[k] for k in STATS_KEYS})


def no_sentinel(folder, *texts):
    for path in folder.rglob("*"):
        if path.is_file():
            assert SENTINEL.encode() not in path.read_bytes(), path
    for text in texts:
        assert SENTINEL not in text


@pytest.fixture(scope="module")
def uninterrupted(requests_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("full") / "run.trec"
    with FaultServer() as server:
        done = finish(rerank_cmd(requests_file, server, out))
    assert server.requests == QUERIES * WINDOWS_PER_QUERY
    no_sentinel(out.parent, done.stdout, done.stderr)
    return outputs(out)


@pytest.mark.parametrize(("gate_at", "torn"), [
    (0, False),  # before the first window is answered
    (14, True),  # mid-round (some queries written, others half-way through their windows), with a torn last
    #              line in the run and the traces, as a kill while writing leaves
    (35, False),  # the very last window
])
def test_killed_rerank_resumes_to_the_uninterrupted_run(requests_file, tmp_path, uninterrupted, gate_at, torn):
    out = tmp_path / "run.trec"
    with FaultServer(gate_at=gate_at) as server:
        killed_err = kill_at(rerank_cmd(requests_file, server, out), server)
        server.gate_at = None
        server.open_gate()
        if torn:
            with open(out, "a") as handle:
                handle.write("q8 Q0 d8_3 1 25.")
            with open(out.with_name("run.trec.traces.jsonl"), "a") as handle:
                handle.write('{"qid": "q8", "start": 15, "en')
        done = finish(rerank_cmd(requests_file, server, out, "--resume"))
    assert "resume:" in done.stderr
    assert outputs(out) == uninterrupted
    no_sentinel(tmp_path, killed_err, done.stdout, done.stderr)


def test_key_never_reaches_an_output_even_when_the_server_echoes_it(requests_file, tmp_path):
    out = tmp_path / "run.trec"
    with FaultServer(cycle=["echo_key"], echo=SENTINEL) as server:
        done = finish(rerank_cmd(requests_file, server, out, "--max-queries", "2"))
    traces = out.with_name("run.trec.traces.jsonl").read_text()
    assert traces.count("key=***") == 2 * WINDOWS_PER_QUERY  # the echo arrived, masked
    no_sentinel(tmp_path, done.stdout, done.stderr)


def test_killed_benchmark_resumes_to_the_uninterrupted_run(dl19, tmp_path, monkeypatch):
    def cmd(server, out, *extra):
        return [sys.executable, "-m", "rearank", "benchmark", "--suite", "dl19", "--max-queries", "4", "--top-k", "30",
                "--backend", "openai", "--model", "m", "-O", f"base_url={server.base_url}", "-O", "max_retries=0",
                "--batch-size", "2", "--no-progress", "--output-dir", str(out), *extra]

    def figures(out):
        return outputs(out / "dl19" / "run.trec", out / "dl19" / "stats.json", out / "dl19" / "traces.jsonl")

    monkeypatch.setenv("REARANK_DATA", str(dl19.parents[1]))
    with FaultServer() as server:
        finish(cmd(server, tmp_path / "full"))
    with FaultServer(gate_at=5) as server:  # 4 queries x 2 windows (schedule(30, 20, 10)); killed at the 6th
        kill_at(cmd(server, tmp_path / "part"), server)
        server.gate_at = None
        server.open_gate()
        finish(cmd(server, tmp_path / "part", "--resume"))
    assert figures(tmp_path / "part") == figures(tmp_path / "full")
    no_sentinel(tmp_path)
