"""``make train-preflight``: every recipe passes on this checkout (the tiny model for the recipe's model, a few
synthesized rows for its data), and a broken copy fails with one clear line naming what is wrong."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, data_root, require, require_pack

require("verl", "the `train` extra")
require("transfer_queue", "the `train` extra")

from rearank.machine import node
from recipes import RECIPES_DIR
from recipes.checks import preflight

QA = "qa/hotpotqa/train_distractor.sample100.json"


@pytest.fixture(scope="module")
def tiny() -> Path:
    from recipes.checks.models import tiny_base

    return tiny_base()


def synth(out: Path, *args: str) -> Path:
    done = subprocess.run([sys.executable, "-m", "rearank", "synth", *args, "--output-dir", str(out), "--quiet"],
                          capture_output=True, text=True, check=False, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "REARANK_DATA": str(data_root())})
    assert done.returncode == 0, done.stderr[-2000:]
    return out


class Data(dict):
    """Each recipe's data folder, synthesized (a few rows, as `rearank synth` writes them) when first asked for."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root

    def __missing__(self, name: str) -> Path:
        qa = str(data_root() / QA)
        if name == "grouprank":
            pack = require_pack("msmarco-v2-passage/dl21")
            second = self.root / "second.trec"
            lines = (pack / "run.bm25.top100.trec").read_text().splitlines()
            second.write_text("".join(f"{q} Q0 {d} {r} {-float(s)} reversed\n"
                                      for q, _, d, r, s, _ in map(str.split, lines)))
            args = ("--labels", "grouprank", "--dataset", "dl21", "--second-run", str(second), "--teacher",
                    "oracle", "--max-queries", "4", "--pool-size", "10", "--set-size", "4", "--samples-per-query",
                    "2", "--tokenizer", "none")
        elif name == "listwise":
            require_pack("msmarco-v2-passage/dl21")
            args = ("--dataset", "dl21", "--samples-per-query", "1", "--set-size", "5", "--max-queries", "4",
                    "--passage-budget", "200c")
        elif name == "reasonrank":
            require_pack("msmarco-v2-passage/dl21")
            args = ("--method", "reasonrank", "--dataset", "dl21", "--teacher", "oracle", "--samples-per-query", "1",
                    "--set-size", "5", "--max-queries", "4", "--passage-budget", "200c")
        else:
            require_pack("qa")
            args = ("--method", name.replace("_", "-"), "--qa", qa, "--qa-limit", "6")
        self[name] = synth(self.root / name, *args)
        return self[name]


@pytest.fixture(autouse=True)
def restore_environ():
    """The environment as it was before each test: a check leaves its REARANK_RL_DATA in os.environ past
    monkeypatch's undo (seen after verl's config validation), which later tests' dry runs would read."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Data:
    return Data(tmp_path_factory.mktemp("preflight-data"))


#: RECIPE= -> (data folder, overrides naming the tiny model)
CASES = {
    "rearank": ("listwise", ["actor_rollout_ref.model.path={tiny}"]),
    "rearank_debug": ("listwise", ["actor_rollout_ref.model.path={tiny}"]),
    "grouprank_sft": ("grouprank", ["model.path={tiny}"]),
    "grouprank_debug": ("grouprank", ["actor_rollout_ref.model.path={tiny}"]),
    "reasonrank_sft": ("reasonrank", ["model.path={tiny}"]),
    "reasonrank_debug": ("reasonrank", ["actor_rollout_ref.model.path={tiny}"]),
    "barrag_selector": ("barrag_selector", ["actor_rollout_ref.model.path={tiny}"]),
    "barrag_generator_debug": ("barrag_generator", ["actor_rollout_ref.model.path={tiny}"]),
    "arena": ("arena", ["actor_rollout_ref.model.path={tiny}"]),
    "rrpo": (None, []),
}


def check(recipe: str, data: dict, tiny: Path, monkeypatch, recipes_dir: Path = RECIPES_DIR, **env: str):
    folder, overrides = CASES[recipe]
    if folder:
        monkeypatch.setenv("REARANK_RL_DATA", str(data[folder]))
    monkeypatch.setenv("REARANK_DATA", str(data_root()))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return preflight.run(recipe, [o.format(tiny=tiny) for o in overrides], rows=2, recipes_dir=recipes_dir)


@pytest.mark.parametrize("recipe", sorted(CASES))
def test_every_recipe_passes_preflight_on_this_checkout(recipe, data, tiny, monkeypatch):
    if recipe == "barrag_selector":  # its reward asks a served reader: the QA oracle, as make train-check serves it
        from recipes.checks.serving import reader_server

        with reader_server(data_root() / QA) as url:
            table = check(recipe, data, tiny, monkeypatch, BARRAG_READER_URL=url)
    else:
        table = check(recipe, data, tiny, monkeypatch)
    here = node.read()
    assert [row for row in table if row.status != "ok" and not (row.check in preflight.NODE_CHECKS and not here.gpus
                                                                and row.status == "skip")] == [], \
        preflight.render(table)
    checks = {row.check for row in table}
    if recipe == "rrpo":
        assert {"launch", "config", "files", "versions"} <= checks
    else:
        assert {"launch", "compose", "env", "config", "files", "model", "data", "versions", *preflight.NODE_CHECKS} \
            <= checks
        assert "reward" in checks or recipe.endswith("_sft")


def broken_copy(tmp_path: Path, file: str, old: str, new: str) -> Path:
    """A copy of the recipes folder with one recipe file's text changed."""
    copy = tmp_path / "recipes"
    shutil.copytree(RECIPES_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    path = copy / file
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    return copy


@pytest.mark.parametrize("case, edit, check_name, message", [
    ("missing env value", ("experiment_name: qwen2.5-7b-grpo", "experiment_name: ${oc.env:PREFLIGHT_UNSET_NAME}"),
     "env", r"not set: PREFLIGHT_UNSET_NAME \(trainer\.experiment_name\)"),
    ("missing file", ("path: pkg://rearank.methods.listwise.reward", "path: /nonexistent/reward.py"),
     "files", r"missing: /nonexistent/reward\.py"),
    ("wrong reward path", ("path: pkg://rearank.methods.listwise.reward", "path: pkg://rearank.no_such_reward"),
     "reward", r"pkg://rearank\.no_such_reward:compute_score"),
])
def test_a_broken_recipe_fails_with_one_clear_line(case, edit, check_name, message, data, tiny, tmp_path):
    copy = broken_copy(tmp_path, "rearank/grpo.yaml", *edit)
    env = {**os.environ, "REARANK_RL_DATA": str(data["listwise"]), "REARANK_DATA": str(data_root()),
           "PYTHONPATH": str(ROOT)}
    env.pop("PREFLIGHT_UNSET_NAME", None)
    proc = subprocess.run([sys.executable, "-m", "recipes.checks.preflight", "rearank", f"actor_rollout_ref.model.path={tiny}",
                           "--rows", "1", "--recipes-dir", str(copy)], capture_output=True, text=True, check=False,
                          cwd=tmp_path, env=env, timeout=600)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert re.search(rf"^preflight: 1 check\(s\) failed; first: rearank/grpo {check_name}: .*{message}", last), last
    table = proc.stdout[proc.stdout.index("command "):]
    assert re.search(rf"rearank/grpo +{check_name} +FAIL ", table), table


def test_missing_data_names_the_files_and_how_to_make_them(tiny, monkeypatch, tmp_path):
    monkeypatch.setenv("REARANK_RL_DATA", str(tmp_path / "nothing"))
    table = preflight.run("rearank", [f"actor_rollout_ref.model.path={tiny}"], rows=1)
    failed = [row for row in table if row.status == "FAIL"]
    assert [row.check for row in failed] == ["files"]
    assert f"{tmp_path / 'nothing' / 'train.parquet'}" in failed[0].detail and "rearank synth" in failed[0].detail


def test_versions_outside_the_tested_set_fail(monkeypatch):
    monkeypatch.setitem(preflight.TESTED, "verl", ("==0.8.0", True))
    with pytest.raises(preflight.CheckError, match=r"verl 0\.9\.1 \(tested ==0\.8\.0\)"):
        preflight.check_versions()


def test_docs_list_the_tested_versions():
    text = (ROOT / "docs" / "training.md").read_text()
    for name, (spec, _) in preflight.TESTED.items():
        assert f"| `{name}` | `{spec}` |" in text, name


H100S = tuple(["NVIDIA H100 80GB HBM3"] * 8)


@pytest.mark.parametrize("reading, failed", [
    (node.Node("580.95.05", H100S, "13.0", "2.27.7", None), []),
    (node.Node("550.54.14", H100S[:4], "13.0", "2.27.7", None),
     [("rearank/grpo", "gpus", "4 x NVIDIA H100 80GB HBM3; the recipe wants 8 per node; set trainer.n_gpus_per_node=4"),
      ("this node", "driver", ("driver 550.54.14; torch built for CUDA 13.0 needs >= 580.65.06; install an NVIDIA "
       "driver >= 580.65.06"))]),
])
def test_the_node_rows_compare_the_gpus_and_driver_with_the_recipe(reading, failed, tiny, monkeypatch, tmp_path):
    monkeypatch.setattr(node, "read", lambda: reading)
    monkeypatch.setenv("REARANK_RL_DATA", str(tmp_path / "nothing"))  # the files row fails; the node rows still run
    table = preflight.run("rearank", [f"actor_rollout_ref.model.path={tiny}"], rows=1)
    rows = {(row.command, row.check): row for row in table if row.check in preflight.NODE_CHECKS}
    assert set(rows) == {("rearank/grpo", "gpus"), ("this node", "driver"), ("this node", "nccl"),
                         ("this node", "attention")}
    bad = [(row.command, row.check, row.detail) for row in rows.values() if row.status == "FAIL"]
    assert [(c, k) for c, k, _ in bad] == [(c, k) for c, k, _ in failed]
    for (_, _, detail), (_, _, start) in zip(bad, failed, strict=True):
        assert detail.startswith(start), detail
    assert all(row.status == "ok" for row in rows.values() if row.status != "FAIL")


def test_a_cpu_machine_skips_the_node_rows_and_says_so(tiny, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(node, "read", lambda: node.Node(None, (), None, None, None))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("REARANK_RL_DATA", str(tmp_path / "nothing"))
    table = preflight.run("rearank", [f"actor_rollout_ref.model.path={tiny}"], rows=1)
    skipped = {row.check: row.detail for row in table if row.status == "skip"}
    assert skipped["gpus"].startswith("no GPU on this machine; the recipe wants 8 per node")
    assert skipped["driver"].startswith("no NVIDIA driver on this machine")


def closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_hub_turns_hub_offline_on(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    line = preflight.hub_offline(timeout_s=2)
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert line.startswith("preflight: http://127.0.0.1:") and "HF_HUB_OFFLINE=1 for this run" in line
    assert preflight.hub_offline(timeout_s=2) is None  # set: no second probe


def test_a_hub_that_answers_stays_online(monkeypatch):
    import http.server
    import threading

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):
            self.send_response(404)  # any answer means the hub is reachable
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
        assert preflight.hub_offline(timeout_s=5) is None
        assert "HF_HUB_OFFLINE" not in os.environ
    finally:
        server.shutdown()
        server.server_close()
