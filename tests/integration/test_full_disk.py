"""A disk that fills up: a run stopped by a full disk keeps its finished queries and ``--resume`` continues it to
the uninterrupted run; the reader cache and the BAR-RAG filter log on ``/dev/full`` end in one clear line.

The full disk mid-run is a fault-injecting file: the run and traces files of ``rearank rerank`` share ``room``
bytes; the write that passes it writes what fits (a torn line, as a real disk leaves) and fails with ENOSPC.
"""

from __future__ import annotations

import builtins
import errno
import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from rearank.cli import main
from rearank.run import files as run_files
from tests.conftest import ROOT
from tests.fault_server import FaultServer
from tests.integration.test_kill_resume import env
from tests.integration.test_rag_faults import barrag_filter, first_title, rag_eval, selection, selector_rows  # noqa: F401

RERANK = ["rerank", "--dataset", "dl19", "--backend", "oracle", "--max-queries", "10", "--no-progress"]
STATS_KEYS = ("queries", "calls", "prompt_tokens", "completion_tokens", "status_counts", "think_budget_hits")


class FillingFile:
    """A text file on a disk with ``room[0]`` characters left (shared by the files of one disk)."""

    def __init__(self, handle, room: list[int]) -> None:
        self.handle, self.room = handle, room

    def write(self, text: str) -> int:
        if len(text) > self.room[0]:
            self.handle.write(text[:self.room[0]])
            self.handle.flush()
            self.room[0] = 0
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room[0] -= len(text)
        return self.handle.write(text)

    def __getattr__(self, name: str):
        return getattr(self.handle, name)


def by_query(run: Path) -> dict[str, list[str]]:
    lines: dict[str, list[str]] = {}
    for line in run.read_text().splitlines():
        lines.setdefault(line.split()[0], []).append(line)
    return lines


def outputs(out: Path) -> tuple:
    stats = json.loads(out.with_name(out.name + ".stats.json").read_text())
    traces = out.with_name(out.name + ".traces.jsonl").read_text().splitlines()
    windows = Counter(json.dumps({k: v for k, v in json.loads(line).items() if k != "latency_s"}, sort_keys=True)
                      for line in traces)
    return sorted(out.read_text().splitlines()), windows, {k: stats[k] for k in STATS_KEYS}


@pytest.fixture
def dl19_env(dl19, monkeypatch):
    monkeypatch.setenv("REARANK_DATA", str(dl19.parents[1]))
    return dl19


def test_a_rerank_stopped_by_a_full_disk_keeps_its_queries_and_resumes(dl19_env, tmp_path, monkeypatch, capsys):
    full = tmp_path / "full" / "run.trec"
    assert main([*RERANK, "--output", str(full)]) == 0
    size = sum(len(p.read_text()) for p in (full, full.with_name("run.trec.traces.jsonl")))
    out = tmp_path / "part" / "run.trec"
    room = [size * 6 // 10]  # the disk fills during the seventh query or so
    real_open = builtins.open

    def on_a_small_disk(target, mode="r", *args, **kwargs):
        handle = real_open(target, mode, *args, **kwargs)
        return FillingFile(handle, room) if Path(target).parent == out.parent and "r" not in mode else handle

    with monkeypatch.context() as disk:
        disk.setattr(run_files, "open", on_a_small_disk, raising=False)
        capsys.readouterr()
        assert main([*RERANK, "--output", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "No space left on device" in err and "--resume" in err, err
    kept = {qid for qid, lines in by_query(out).items() if lines == by_query(full).get(qid)}  # intact
    assert 0 < len(kept) < 10  # some queries finished before the disk filled, not all
    # space freed (the context has ended); a torn last line whose qid is cut short must not stop the resume
    assert main([*RERANK, "--output", str(out), "--resume"]) == 0
    assert f"resume: {len(kept)} of 10 queries already in {out}" in capsys.readouterr().err
    assert outputs(out) == outputs(full)


def test_the_reader_cache_on_a_full_device_is_one_clear_line(tmp_path):
    with FaultServer(answer=first_title) as server:
        done = subprocess.run(rag_eval(server, tmp_path / "rag", "--reader-cache", "/dev/full", retries=0),
                              check=False, env=env(), capture_output=True, text=True, timeout=120, cwd=ROOT)
    code, err = done.returncode, done.stderr.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("rearank rag: error: /dev/full: cannot write (No space left on device)"), err


def test_the_barrag_filter_log_on_a_full_device_is_one_clear_line(selector_rows, tmp_path):  # noqa: F811
    out = tmp_path / "filtered"
    out.mkdir()
    (out / "filter_log.jsonl").symlink_to("/dev/full")  # appended to, one record a question
    with FaultServer(answer=selection) as selector, FaultServer(answer=first_title) as reader:
        done = subprocess.run(barrag_filter(selector_rows, out, selector, reader), check=False, env=env(),
                              capture_output=True, text=True, timeout=120, cwd=ROOT)
    code, err = done.returncode, done.stderr.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"{out / 'filter_log.jsonl'}: cannot write (No space left on device)" in err, err
    assert not (out / "filter_stats.json").exists()
