"""RRPO's own trainer on CPU, the same shape of check as ``make train-cpu``: ``rearank rag rrpo train`` with the
HotpotQA recipe and only size overrides (a 2-layer SmolLM2 scorer, the noisy-gold reader, 2 steps), a
checkpoint, ``--resume`` for 2 more steps, and ``final/`` reranking two dl19 queries with ``--method pointwise``."""

import json
import math
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, data_root, require, require_pack

require("torch")
require("transformers", "the `hf` extra")

pytestmark = pytest.mark.slow


def rearank(*args):
    env = {**os.environ, "REARANK_DATA": str(data_root())}
    proc = subprocess.run([sys.executable, "-m", "rearank", *args], capture_output=True, text=True, check=False,
                          env=env, cwd=ROOT, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc


def test_rrpo_two_steps_checkpoint_resume_and_final_reranks(tmp_path):
    qa = require_pack("qa") / "hotpotqa" / "train_distractor.sample100.json"
    require_pack("msmarco-v1-passage/dl19")
    out = tmp_path / "rrpo"
    sizes = [f"data={qa}", "limit=4", "eval_data=null", f"output={out}", "scorer=embedded", "kind=causal-yes",
             "num_layers=2", "max_passage_tokens=48", "device=cpu", "reader=noisy-gold", "reader_model=null",
             "reader_options={}", "k=2", "batch_size=2", "epochs=1", "save_every=1"]
    settings = [arg for kv in sizes for arg in ("--set", kv)]
    rearank("rag", "rrpo", "train", "--config", str(ROOT / "recipes" / "rrpo" / "hotpotqa.yaml"), *settings,
            "--no-progress")
    state = json.loads((out / "checkpoint" / "state.json").read_text())
    assert state["step"] == 2
    rearank("rag", "rrpo", "train", "--config", str(ROOT / "recipes" / "rrpo" / "hotpotqa.yaml"), *settings,
            "--set", "epochs=2", "--resume", "--no-progress")
    state = json.loads((out / "checkpoint" / "state.json").read_text())
    assert state["step"] == 4
    steps = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines() if '"step"' in line]
    losses = [row["loss"] for row in steps if "loss" in row]
    assert len(losses) >= 3 and all(math.isfinite(x) for x in losses)
    run = tmp_path / "pointwise.trec"
    rearank("rerank", "--dataset", "dl19", "--max-queries", "2", "--method", "pointwise", "--backend", "hf",
            "--model", str(out / "final"), "--top-k", "10", "--max-new-tokens", "8", "--output", str(run),
            "--no-progress")  # the 2-layer scorer never stops by itself: a grade needs a few tokens
    assert len({line.split()[0] for line in run.read_text().splitlines()}) == 2
