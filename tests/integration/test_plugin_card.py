"""A RAG method from a package outside rearank (the toy plugin's ``toy-reader`` card: its own template, parser,
oracle answer, reward, example completions and rows), registered only by its pyproject's entry points, run through
``rearank rag eval``, ``rearank synth --method`` and the recipe check, in child processes that see the package as
pip would install it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
import tomllib

from tests.conftest import require_pack
from tests.integration.test_plugins import PLUGIN, ROOT, install_metadata

TRAIN = "hotpotqa/train_distractor.sample100.json"


@pytest.fixture(scope="module")
def card_env(tmp_path_factory):
    """The environment of a Python that has the toy plugin installed (its entry points as the pyproject says)."""
    site = tmp_path_factory.mktemp("site")
    project = tomllib.loads((PLUGIN / "pyproject.toml").read_text())["project"]
    install_metadata(site, project["name"], project["entry-points"])
    path = os.pathsep.join([str(site), str(PLUGIN), str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "REARANK_DATA": str(require_pack("qa").parent)}


def run(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], check=False, env=env, capture_output=True, text=True, timeout=300)


def test_rag_eval_reads_the_plugin_format_through_the_oracle_reader(card_env, tmp_path):
    qa = require_pack("qa") / TRAIN
    results = {}
    for template in ("toy-reader", "plain"):
        out = tmp_path / template
        done = run(card_env, "-m", "rearank", "rag", "eval", "--data", str(qa), "--limit", "12", "--selector",
                   "oracle", "--reader", "gold", "--template", template, "--k", "1,3", "--output-dir", str(out),
                   "--no-progress")
        assert done.returncode == 0, done.stderr
        results[template] = [json.loads(line) for line in (out / "items.jsonl").read_text().splitlines()]
    toy, plain = results["toy-reader"], results["plain"]
    # the oracle wrote its answer in the card's format and the card's parser read it back: the same answers and EM
    assert all(r["k"][k]["response"].startswith("ANSWER=") for r in toy for k in r["k"])
    assert [[r["k"][k]["answer"] for k in ("1", "3")] for r in toy] == \
        [[r["k"][k]["answer"] for k in ("1", "3")] for r in plain]
    assert [r["k"]["3"]["em"] for r in toy] == [r["k"]["3"]["em"] for r in plain]
    assert sum(r["k"]["3"]["em"] for r in toy) > 0


def test_synth_writes_the_plugin_cards_rows(card_env, tmp_path):
    qa = require_pack("qa") / TRAIN
    out = tmp_path / "rows"
    done = run(card_env, "-m", "rearank", "synth", "--method", "toy-reader", "--qa", str(qa), "--qa-limit", "10",
               "--tokenizer", "none", "--val-fraction", "0", "--output-dir", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    rows = pq.read_table(out / "train.parquet").to_pylist()
    assert len(rows) == 10 and {r["ability"] for r in rows} == {"rag-qa"}
    first = rows[0]
    assert first["prompt"][0]["content"].startswith("Read the notes") and "Question: " in first["prompt"][-1]["content"]
    assert json.loads(first["reward_model"]["ground_truth"])["answers"] and len(first["extra_info"]["pids"]) == 3
    assert json.loads((out / "stats.json").read_text())["method"] == "toy-reader"


def test_the_recipe_check_scores_the_plugin_cards_completions(card_env):
    done = run(card_env, "-m", "recipes.checks.check_rag", "--card", "toy-reader", "--rows", "3")
    assert done.returncode == 0, done.stderr
    assert "[ok] card toy-reader: 3 rows; 9 example completions scored by pkg://toy_plugin.card:compute_score" \
        in done.stdout


def test_a_card_the_recipe_check_cannot_score_fails_with_one_line(card_env):
    done = run(card_env, "-m", "recipes.checks.check_rag", "--card", "pointwise")
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1
    assert "card pointwise builds rows from QA files and declares a reward" in done.stderr
