"""`rearank synth` SIGKILLed while it replaces earlier outputs: the folder then holds the old set or the new one,
never a mix, and no temporary file survives the next run.

The run is held at the moment of the kill: a wrapper makes it print a line and block at that point, the test
reads the line, checks the process is alive, SIGKILLs it and checks it died by that signal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from data_synthesis.writers import MANIFEST, STAGING, check_output_dir, verify
from tests.conftest import ROOT

QUERIES, CANDIDATES = 60, 40


@pytest.fixture(scope="module")
def pack(tmp_path_factory) -> list[str]:
    folder = tmp_path_factory.mktemp("pack")
    run, topics, docs, qrels = (folder / n for n in ("run.trec", "topics.tsv", "docs.tsv", "qrels.txt"))
    run.write_text("".join(f"q{q} Q0 d{q}_{c} {c + 1} {CANDIDATES - c} bm25\n"
                           for q in range(QUERIES) for c in range(CANDIDATES)))
    topics.write_text("".join(f"q{q}\tquery {q}\n" for q in range(QUERIES)))
    docs.write_text("".join(f"d{q}_{c}\t{'passage words ' * 30}{q} {c}\n"
                            for q in range(QUERIES) for c in range(CANDIDATES)))
    qrels.write_text("".join(f"q{q} 0 d{q}_{c} {c % 3}\n" for q in range(QUERIES) for c in range(0, CANDIDATES, 4)))
    return ["--run", str(run), "--topics", str(topics), "--docs", str(docs), "--qrels", str(qrels),
            "--samples-per-query", "20", "--set-size", "10", "--tokenizer", "none", "--sft", "--quiet"]


#: Runs ``rearank synth`` held at a moment (argv[1]): after the first staged file is written (``staging``), or
#: in the final renames, after the commit point and one file moved into place (``replacing``). There it prints
#: HELD and blocks on stdin, so the test kills a process that is mid-work for certain.
HOLD = """
import os, sys
import data_synthesis.pipeline as pipeline
import data_synthesis.writers as writers
from rearank.cli import main

def hold():
    print("HELD", flush=True)
    sys.stdin.read()

moment = sys.argv.pop(1)
if moment == "staging":
    write_parquet = pipeline.write_parquet
    def held_write(path, rows):
        write_parquet(path, rows)
        hold()
    pipeline.write_parquet = held_write
else:
    class HeldOs:
        def __getattr__(self, name):
            return getattr(os, name)
        def replace(self, src, dst):
            os.replace(src, dst)
            hold()
    writers.os = HeldOs()
sys.exit(main(sys.argv[1:]))
"""


def synth(pack, out: Path, seed: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "rearank", "synth", *pack, "--seed", str(seed), "--output-dir", str(out), *extra]


def kill_when_held(cmd: list[str], moment: str) -> None:
    """Run ``cmd`` (a ``rearank`` command line) held at ``moment``; SIGKILL it there and check the kill."""
    held = [sys.executable, "-c", HOLD, moment, *cmd[cmd.index("rearank") + 1:]]
    proc = subprocess.Popen(held, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        line = proc.stdout.readline()  # returns at HELD, or at the end of a run that never got there
        assert line == "HELD\n", f"the run did not reach {moment}: {line!r} {proc.communicate()[1][-2000:]}"
        assert proc.poll() is None  # held: alive until the kill
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL


def complete(cmd) -> None:
    done = subprocess.run(cmd, check=False, capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def sets(pack, tmp_path_factory):
    """The manifests of a complete seed-0 run (old) and seed-1 run (new)."""
    old, new = tmp_path_factory.mktemp("old"), tmp_path_factory.mktemp("new")
    complete(synth(pack, old, 0))
    complete(synth(pack, new, 1))
    return old, verify(old), verify(new)


@pytest.mark.parametrize(("moment", "kept"), [("staging", "old"), ("replacing", "new")])
def test_killed_synth_leaves_old_or_new_never_a_mix(pack, sets, tmp_path, moment, kept):
    old_dir, old, new = sets
    out = tmp_path / "out"
    out.mkdir()
    for path in old_dir.iterdir():
        (out / path.name).write_bytes(path.read_bytes())
    kill_when_held(synth(pack, out, 1, "--overwrite"), moment)
    if moment == "staging":
        assert (out / STAGING).is_dir() and not (out / STAGING / MANIFEST).exists()  # killed before the commit
    else:
        assert (out / STAGING / MANIFEST).is_file() and not (out / MANIFEST).exists()  # a mix until recovered
    check_output_dir(out, overwrite=True)  # what the next `rearank synth` does first
    assert verify(out) == {"old": old, "new": new}[kept]
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted([*verify(out)["files"], MANIFEST])  # no staging folder, no temporary file
    if verify(out) == old:
        assert json.loads((out / "stats.json").read_text())["config"]["seed"] == 0
    else:
        assert json.loads((out / "stats.json").read_text())["config"]["seed"] == 1


def test_synth_refuses_to_replace_earlier_outputs(pack, sets, capsys):
    from rearank.cli import main

    old_dir, old, _ = sets
    code = main(["synth", *pack, "--output-dir", str(old_dir)])
    err = capsys.readouterr().err
    assert code == 2 and "already holds synthesis outputs" in err and "--overwrite" in err
    assert verify(old_dir) == old
