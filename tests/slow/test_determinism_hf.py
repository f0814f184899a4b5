"""Determinism, measured on hf: the same greedy ``rearank rerank`` of the embedded SmolLM2 on CPU, run twice in
two processes, writes byte-identical runs and traces. Each trace line carries the window's ``latency_s`` (wall
time, which differs run to run); it is cut out of both files' bytes before they are compared, and nothing else is."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT, data_root, require, require_pack

require("torch")
require("transformers", "the `hf` extra")

pytestmark = pytest.mark.slow

#: The one timing field of a trace line, as the traces writer prints it (before the next field).
LATENCY = re.compile(rb'"latency_s": [0-9.eE+-]+, ')


def rerank(out, name: str) -> tuple[bytes, bytes]:
    """One run: 1 dl19 query, its top 10 reranked in 2 windows of 5, greedy, 48 new tokens; (run, traces) bytes."""
    run, traces = out / f"{name}.trec", out / f"{name}.jsonl"
    env = {**os.environ, "REARANK_DATA": str(data_root())}
    proc = subprocess.run(
        [sys.executable, "-m", "rearank", "rerank", "--dataset", "dl19", "--max-queries", "1", "--backend", "hf",
         "--model", "embedded", "--temperature", "0", "--top-k", "10", "--window", "5", "--step", "5",
         "--passage-budget", "32", "--max-new-tokens", "48", "--output", str(run), "--traces", str(traces),
         "--no-progress"], capture_output=True, text=True, check=False, env=env, cwd=ROOT, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return run.read_bytes(), traces.read_bytes()


def test_the_same_greedy_rerank_twice_writes_the_same_bytes(tmp_path):
    require_pack("msmarco-v1-passage/dl19")
    first_run, first_traces = rerank(tmp_path, "first")
    second_run, second_traces = rerank(tmp_path, "second")
    windows = [json.loads(line) for line in first_traces.splitlines()]
    assert len(windows) == 2 and all(w["completion_tokens"] > 0 and w["raw_output"] for w in windows)
    assert len(first_run.splitlines()) == 100  # the top 10 reranked, the rest of the top 100 after them
    assert first_run == second_run
    assert len(LATENCY.findall(first_traces)) == len(LATENCY.findall(second_traces)) == len(windows)
    assert LATENCY.sub(b"", first_traces) == LATENCY.sub(b"", second_traces)
