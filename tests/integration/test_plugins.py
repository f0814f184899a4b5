"""A ranking method (its card) and a backend from a package outside rearank (tests/fixtures/toy_plugin), registered
only by the entry points of its pyproject.toml, run through ``rearank rerank``, ``rearank benchmark``, ``rearank
serve``, the face and ``rearank synth``, in child processes that see the package as pip would install it (a
dist-info folder on the path)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pyarrow.parquet as pq
import pytest
import tomllib

from rearank.data import packs
from rearank.io.qa import load_qa
from rearank.io.trec import read_run
from rearank.run.job import ALL_CANDIDATES
from tests.conftest import require_pack
from tests.serving import serve_command

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "tests" / "fixtures" / "toy_plugin"


def install_metadata(site: Path, name: str, entry_points: dict[str, dict[str, str]]) -> None:
    """What ``pip install`` leaves for entry-point discovery: a dist-info folder with METADATA and
    entry_points.txt."""
    info = site / f"{name.replace('-', '_')}-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in points.items()) + "\n"
        for group, points in entry_points.items()))


@pytest.fixture
def plugin_env(tmp_path_factory, dl19):
    """The environment of a Python that has the toy plugin installed (its entry points as the pyproject says)."""
    site = tmp_path_factory.mktemp("site")
    project = tomllib.loads((PLUGIN / "pyproject.toml").read_text())["project"]
    install_metadata(site, project["name"], project["entry-points"])
    path = os.pathsep.join([str(site), str(PLUGIN), str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "REARANK_DATA": str(dl19.parents[1])}


def rearank(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rearank", *argv], check=False, env=env, capture_output=True, text=True,
                          timeout=300)


def by_length(texts: list[str], preview: int) -> list[int]:
    """The toy backend's order: longest shown text first, ties by position."""
    return sorted(range(len(texts)), key=lambda i: (-len(texts[i][:preview]), i))


def expected_runs(dl19: Path, top_k: int, preview: int, queries: int) -> dict[str, list[str]]:
    requests = packs.load_requests(run=dl19 / "run.bm25.top100.trec", topics=dl19 / "topics.tsv",
                                   docs=dl19 / "docs.tsv", top_k=ALL_CANDIDATES, max_queries=queries)
    out = {}
    for request in requests:
        head = [c.text for c in request.candidates[:top_k]]
        docids = [c.docid for c in request.candidates]
        out[request.query.qid] = [docids[i] for i in by_length(head, preview)] + docids[top_k:]
    return out


def ranked(run_file: Path) -> dict[str, list[str]]:
    return {qid: [docid for docid, _ in pairs] for qid, pairs in read_run(run_file).items()}


def test_rerank_command_runs_a_plugin_method_on_a_plugin_backend(plugin_env, dl19, tmp_path):
    out = tmp_path / "toy.trec"
    done = rearank(plugin_env, "rerank", "--run", str(dl19 / "run.bm25.top100.trec"), "--topics",
                   str(dl19 / "topics.tsv"), "--docs", str(dl19 / "docs.tsv"), "--max-queries", "3", "--method",
                   "toy-sort", "--backend", "toy-length", "--top-k", "20", "--preview-chars", "1000",
                   "-o", str(out), "--no-progress")
    assert done.returncode == 0, done.stderr
    expected = expected_runs(dl19, 20, 1000, 3)
    assert ranked(out) == expected
    # the method's own flag reached it: with the default preview (200 characters) the orders differ
    assert expected != expected_runs(dl19, 20, 200, 3)
    traces = [json.loads(line) for line in out.with_name(out.name + ".traces.jsonl").read_text().splitlines()]
    assert {t["status"] for t in traces} == {"ok"} and len(traces) == 3
    help_text = rearank(plugin_env, "rerank", "--help").stdout
    assert "toy-sort (--method toy-sort)" in help_text and "--preview-chars" in help_text


def test_benchmark_command_runs_the_plugin(plugin_env, dl19, tmp_path):
    out = tmp_path / "suite"
    done = rearank(plugin_env, "benchmark", "--suite", "dl19", "--max-queries", "2", "--method", "toy-sort",
                   "--backend", "toy-length", "--top-k", "20", "--preview-chars", "1000", "--output-dir", str(out),
                   "--no-progress")
    assert done.returncode == 0, done.stderr
    suite = json.loads((out / "suite.json").read_text())
    assert suite["method"] == "toy-sort" and suite["backend"] == "toy-length" and suite["preview_chars"] == 1000
    metrics = json.loads((out / "dl19" / "metrics.json").read_text())
    assert metrics["queries"] == 2
    judged = set(packs.load_qrels(dl19 / "qrels.txt"))
    run = ranked(out / "dl19" / "run.trec")
    expected = {q: ids[:20] for q, ids in expected_runs(dl19, 20, 1000, 50).items() if q in judged}
    assert {q: ids[:20] for q, ids in run.items()} == {q: expected[q] for q in run}


def test_server_serves_the_plugin(plugin_env, tmp_path):
    with open(tmp_path / "server.log", "w") as log, \
            serve_command(["--backend", "toy-length", "--method", "toy-sort", "-O", "preview_chars=3"], plugin_env,
                          log) as (_, url):
        answer = httpx.post(url + "/v1/rerank", json={"query": "q", "documents": ["ab", "a", "abcdef", "abc"]},
                            timeout=600).json()
    # previews of 3 characters: "ab" 2, "a" 1, "abc" 3, "abc" 3 -> 2, 3 (tie: input order), 0, 1
    assert [r["index"] for r in answer["results"]] == [2, 3, 0, 1]
    assert answer["rearank"]["method"] == "toy-sort" and answer["rearank"]["status"] == "ok"


def test_face_runs_the_plugin_and_names_a_broken_one(plugin_env, tmp_path):
    script = ("import json; from rearank import Reranker\n"
              "r = Reranker('any', backend='toy-length', method='toy-sort', preview_chars=2)\n"
              "print(json.dumps(r.rerank('q', ['a', 'abc', 'ab']).order))\n")
    done = subprocess.run([sys.executable, "-c", script], check=False, env=plugin_env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [1, 2, 0]  # previews "a", "ab", "ab"
    broken = tmp_path / "broken-site"
    install_metadata(broken, "broken-plugin", {"rearank.cards": {"broken": "toy_plugin.nowhere:Nothing"}})
    env = {**plugin_env, "PYTHONPATH": f"{broken}{os.pathsep}{plugin_env['PYTHONPATH']}"}
    script = "from rearank import Reranker\nReranker('any', backend='toy-length', method='broken')\n"
    done = subprocess.run([sys.executable, "-c", script], check=False, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert ("RearankError: the rearank.cards entry point 'broken' (toy_plugin.nowhere:Nothing) failed to load: "
            "ModuleNotFoundError") in done.stderr
    # the command line still works for every other method, and says which one it left out
    done = rearank(env, "rerank", "--help")
    assert done.returncode == 0 and "toy-sort" in done.stdout
    assert "'broken' (toy_plugin.nowhere:Nothing) failed to load" in done.stderr


def test_synth_writes_verl_rows_of_the_plugin_method(plugin_env, dl19, tmp_path):
    # as for the builtin methods (test_synth_sources.py): sampled sets of dl21 and dl19, one parquet split by query;
    # each set prompted by the plugin's method as `rerank` prompts it, its SFT target the method's ideal answer
    dl21 = require_pack("msmarco-v2-passage/dl21")
    out = tmp_path / "rows"
    done = rearank(plugin_env, "synth", "--method", "toy-sort", "--dataset", "dl21,dl19", "--samples-per-query", "3",
                   "--tokenizer", "embedded", "--sft", "--output-dir", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    stats = json.loads((out / "stats.json").read_text())
    assert stats["config"]["method"] == "toy-sort" and list(stats["sources"]) == ["dl21", "dl19"]
    assert stats["prompt_tokens"]["check"]["max_abs_error"] == 0 and stats["prompt_tokens"]["all"]["max"] > 0
    assert "the `toy-sort` method's own prompts" in (out / "stats.md").read_text()
    rows = [row for split in ("train", "val") for row in pq.read_table(out / f"{split}.parquet").to_pylist()]
    assert len(rows) == stats["filters"]["kept"] > 0
    assert {row["ability"] for row in rows} == {"rerank"}
    assert {row["data_source"] for row in rows} == {"rearank/dl21", "rearank/dl19"}
    texts = {c.docid: c.text for pack in (dl21, dl19) for request in packs.load_requests(
        run=pack / "run.bm25.top100.trec", topics=pack / "topics.tsv", docs=pack / "docs.tsv") for c in request.candidates}
    sft = {(r["extra_info"]["qid"], r["extra_info"]["set_index"]): r["completion"][0]["content"] for split in ("train", "val")
           for r in map(json.loads, (out / f"sft_{split}.jsonl").read_text().splitlines())}
    for row in rows:
        info, labels = row["extra_info"], json.loads(row["reward_model"]["ground_truth"])["labels"]
        lines = [f"[{i + 1}] {texts[docid][:200]}" for i, docid in enumerate(info["docids"])]
        assert row["prompt"] == [{"role": "user", "content": f"Query: {info['query']}\n" + "\n".join(lines)}]
        assert len(labels) == len(info["docids"]) == 20
        best_first = sorted(range(len(labels)), key=lambda i: -labels[i])
        assert sft[info["qid"], info["set_index"]] == " ".join(str(i + 1) for i in best_first)


def test_a_plugin_backend_is_a_rag_reader(plugin_env, tmp_path):
    # readers are backends of the one registry: a plugin's backend is a `rag eval --reader` with no edit in rearank
    data = require_pack("qa") / "hotpotqa/dev_distractor.first103.json"
    done = rearank(plugin_env, "rag", "eval", "--data", str(data), "--limit", "2", "--selector", "oracle", "--reader",
                   "toy-length", "--reader-model", "any", "--k", "1", "--no-progress", "--output-dir", str(tmp_path / "rag"))
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (tmp_path / "rag" / "items.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all("response" in row["k"]["1"] for row in rows)
    assert "toy-length" in rearank(plugin_env, "rag", "eval", "--help").stdout


def test_a_plugin_method_selects_passages_in_rag_eval(plugin_env, tmp_path):
    # any ranking method is a selector, METHOD:MODEL, built as every face builds a run: toy-sort on toy-length, with
    # the method's own option, ranks each question's paragraphs longest first
    data = require_pack("qa") / "hotpotqa/dev_distractor.first103.json"
    out = tmp_path / "rag"
    done = rearank(plugin_env, "rag", "eval", "--data", str(data), "--limit", "2", "--selector", "toy-sort:any",
                   "-S", "backend=toy-length", "-S", "preview_chars=1000", "--reader", "gold", "--k", "1,3",
                   "--no-progress", "--output-dir", str(out))
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (out / "items.jsonl").read_text().splitlines()]
    items = load_qa(data)[:2]
    expected = [[item.passages[i].pid for i in by_length([p.text for p in item.passages], 1000)] for item in items]
    assert [row["ranking"] for row in rows] == expected
    assert [row["k"]["3"]["passages"] for row in rows] == [ranking[:3] for ranking in expected]
    # the method's option reached it: with the default preview (200 characters) the orders differ
    assert expected != [[item.passages[i].pid for i in by_length([p.text for p in item.passages], 200)]
                        for item in items]
    assert json.loads((out / "config.json").read_text())["selector"] == "toy-sort:any"
