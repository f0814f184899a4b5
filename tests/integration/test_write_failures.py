"""Every writer a user meets on the command line, on a place it cannot write: one line naming the path, exit 2.

What each case simulates, honestly:

* ``/dev/full`` (given as the path, or behind a symlink the command opens for appending): every write fails with
  ENOSPC, as on a full disk, from the first byte on.
* a path under a regular file: the folder cannot be made (``NotADirectoryError`` / ``FileExistsError``); it stands
  in for a read-only folder, which root (these tests often run as root) would write into anyway.
* a tiny tmpfs mounted in a private user and mount namespace (``unshare -rm``): a real file system that fills
  part-way through a run, so the first files are written and a later write fails. Where the kernel refuses
  such a namespace the case is skipped with that reason (it is a property of the machine, not a dependency).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from rearank.cli import main
from tests.conftest import ROOT, data_root, require_pack
from tests.serving import serve_command

QA = "hotpotqa/dev_distractor.first103.json"
RERANK = ["rerank", "--dataset", "dl19", "--backend", "oracle", "--max-queries", "3", "--no-progress"]


@pytest.fixture
def dl19_env(dl19, monkeypatch):
    monkeypatch.setenv("REARANK_DATA", str(dl19.parents[1]))
    return dl19


@pytest.fixture
def blocker(tmp_path) -> Path:
    """A regular file: any path under it cannot be created."""
    path = tmp_path / "a-file"
    path.write_text("not a folder\n")
    return path


def one_line_error(code: int, err: str, path: object) -> None:
    """The command failed with the user-error code and one stderr line that names ``path``, no traceback."""
    assert code == 2, err
    assert "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert str(path) in err, err


def run_main(capsys, args: list[str]) -> tuple[int, str]:
    code = main(args)
    return code, capsys.readouterr().err


# ---------------------------------------------------------------- rerank: run, traces, stats


def test_rerank_traces_on_dev_full(dl19_env, tmp_path, capsys):
    """The regression of issue 20: ``--traces /dev/full`` ended in ``OSError`` from ``truncate(0)``."""
    out = tmp_path / "run.trec"
    code, err = run_main(capsys, [*RERANK, "--output", str(out), "--traces", "/dev/full"])
    one_line_error(code, err, "/dev/full")
    assert "No space left on device" in err and "--resume" in err


def test_rerank_traces_on_dev_null_is_a_normal_run(dl19_env, tmp_path, capsys):
    out = tmp_path / "run.trec"
    assert main([*RERANK, "--output", str(out), "--traces", "/dev/null"]) == 0
    assert len(out.read_text().splitlines()) == 300


def test_rerank_run_file_on_a_full_device(dl19_env, tmp_path, capsys):
    out = tmp_path / "run.trec"
    out.symlink_to("/dev/full")  # the run file is opened for appending, so the link is followed
    code, err = run_main(capsys, [*RERANK, "--output", str(out)])
    one_line_error(code, err, out)
    assert "No space left on device" in err


def test_rerank_output_folder_cannot_be_made(dl19_env, blocker, capsys):
    out = blocker / "runs" / "run.trec"
    one_line_error(*run_main(capsys, [*RERANK, "--output", str(out)]), out)


def test_rerank_stats_cannot_be_written(dl19_env, tmp_path, capsys):
    out = tmp_path / "run.trec"
    (tmp_path / "run.trec.stats.json").mkdir()  # the stats file's place is taken by a folder
    code, err = run_main(capsys, [*RERANK, "--output", str(out)])
    one_line_error(code, err, tmp_path / "run.trec.stats.json")


# ---------------------------------------------------------------- synthesis


def test_synth_output_folder_cannot_be_made(dl19_env, blocker, capsys):
    out = blocker / "synth"
    one_line_error(*run_main(capsys, ["synth", "--dataset", "dl19", "--output-dir", str(out), "--quiet"]), out)


# ---------------------------------------------------------------- RAG logs


def rag_eval(out: Path, *extra: str) -> list[str]:
    data = require_pack("qa") / QA
    return ["rag", "eval", "--data", str(data), "--limit", "4", "--k", "2", "--output-dir", str(out), "--no-progress",
            *extra]


def test_rag_items_log_on_a_full_device(tmp_path, capsys):
    out = tmp_path / "rag"
    out.mkdir()
    (out / "items.jsonl").symlink_to("/dev/full")  # appended to, one record a question
    code, err = run_main(capsys, rag_eval(out))
    one_line_error(code, err, out / "items.jsonl")
    assert "No space left on device" in err


def test_rag_output_folder_cannot_be_made(blocker, capsys):
    out = blocker / "rag"
    one_line_error(*run_main(capsys, rag_eval(out)), out)


# ---------------------------------------------------------------- a real file system that fills up


@pytest.fixture(scope="module")
def tiny_disk(tmp_path_factory):
    """A function running a command on a fresh tmpfs of a given size; skips where none can be mounted."""
    unshare = shutil.which("unshare")
    mount_point = tmp_path_factory.mktemp("disk")
    probe = [unshare or "unshare", "-rm", "mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(mount_point)]
    if unshare is None or subprocess.run(probe, check=False, capture_output=True).returncode != 0:
        pytest.skip("this machine cannot mount a tmpfs in a private namespace (unshare -rm), so no full disk")

    def run(size: str, args: list[str]) -> subprocess.CompletedProcess:
        script = f'mount -t tmpfs -o size={size} tmpfs "$0" && exec "$@"'
        env = {**os.environ, "REARANK_DATA": str(data_root()), "PYTHONPATH": str(ROOT)}
        return subprocess.run([unshare, "-rm", "sh", "-c", script, str(mount_point), sys.executable, "-m",
                               "rearank", *args], check=False, capture_output=True, text=True, env=env, cwd=ROOT,
                              timeout=300)

    run.mount_point = mount_point
    return run


@pytest.mark.parametrize(("command", "size", "full_file"), [
    ("rerank", "16k", "run.trec.traces.jsonl"),  # 10 queries' traces need about 60 KB
    ("synth", "16k", "synth"),  # the parquet files are staged inside the output folder
    ("rag", "24k", "items.jsonl"),  # 60 questions' records need about 30 KB
])
def test_a_disk_that_fills_mid_run(dl19, tiny_disk, command, size, full_file):
    """A small real file system: the first writes succeed, a later one fails; it is named, no traceback."""
    disk = tiny_disk.mount_point
    qa = require_pack("qa") / QA
    args = {
        "rerank": ["rerank", "--dataset", "dl19", "--backend", "oracle", "--max-queries", "10", "--no-progress",
                   "--output", str(disk / "run.trec")],
        "synth": ["synth", "--dataset", "dl19", "--output-dir", str(disk / "synth"), "--quiet"],
        "rag": ["rag", "eval", "--data", str(qa), "--limit", "60", "--k", "2", "--output-dir", str(disk / "rag"),
                "--no-progress"],
    }[command]
    done = tiny_disk(size, args)
    one_line_error(done.returncode, done.stderr, full_file)
    assert str(disk) in done.stderr and "No space left on device" in done.stderr


# ---------------------------------------------------------------- server logs


def test_server_keeps_answering_when_its_log_cannot_be_written(dl19):
    """``rearank serve`` logs to stderr only (no log file of its own): with stdout and stderr on /dev/full, every
    log line fails, and the server still starts and answers; a log that cannot be written must not stop it. The
    test owns the port-0 socket (``--fd``): the log that would name a port cannot be read."""
    env = {**os.environ, "REARANK_DATA": str(dl19.parents[1])}
    with open("/dev/full", "w") as full, \
            serve_command(["--backend", "oracle", "--dataset", "dl19"], env, full, cwd=str(ROOT)) as (proc, url):
        body = {"model": "oracle", "query": "what is a flea", "documents": ["a flea is an insect", "a dog"]}
        answer = httpx.post(url + "/v1/rerank", json=body, timeout=600)
        assert answer.status_code == 200 and len(answer.json()["results"]) == 2
        assert httpx.post(url + "/v1/rerank", json={"query": 3}, timeout=600).status_code == 422  # a logged error
        assert proc.poll() is None
