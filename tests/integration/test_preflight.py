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
    assert [row for row in table if row.status != "ok"] == [], preflight.render(table)
    checks = {row.check for row in table}
    if recipe == "rrpo":
        assert {"launch", "config", "files", "versions"} <= checks
    else:
        assert {"launch", "compose", "env", "config", "files", "model", "data", "versions"} <= checks
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
