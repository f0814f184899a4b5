"""GroupRank teacher labels on dl21 (`rearank synth --labels grouprank`), the oracle as both teachers.

The second run is a real second lexical retriever, built here: Dirichlet-smoothed query likelihood (mu = 1000)
over the pack's BM25 top-100 pool (the pack holds texts for those passages only, and no dense model runs here).
Its order differs from BM25's, so the hybrid stage (Eq. 5) really fuses two rankings.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import ROOT, data_root, require_pack

QUERIES = 6


def tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


@pytest.fixture(scope="module")
def dl21(tmp_path_factory):
    """The pack's BM25 run and qrels, and the query-likelihood second run written as a TREC file."""
    pack = require_pack("msmarco-v2-passage/dl21")
    from rearank.data.packs import load_qrels, load_requests

    requests = load_requests(run=pack / "run.bm25.top100.trec", topics=pack / "topics.tsv", docs=pack / "docs.tsv")
    docs = {c.docid: Counter(tokens(c.text)) for r in requests for c in r.candidates}
    collection = Counter()
    for tf in docs.values():
        collection.update(tf)
    size = sum(collection.values())
    run = tmp_path_factory.mktemp("second") / "ql.trec"
    lines = []
    for r in requests:
        q = tokens(r.query.text)
        scored = sorted(((sum(math.log((docs[c.docid][w] + 1000 * (collection[w] + 0.5) / size)
                                       / (sum(docs[c.docid].values()) + 1000)) for w in q), c.docid)
                         for c in r.candidates), key=lambda x: (-x[0], x[1]))
        lines += [f"{r.query.qid} Q0 {d} {i + 1} {s:.6f} ql\n" for i, (s, d) in enumerate(scored)]
    run.write_text("".join(lines))
    bm25 = {r.query.qid: {c.docid: c.score for c in r.candidates} for r in requests}
    second = defaultdict(dict)
    for line in lines:
        qid, _, docid, _, score, _ = line.split()
        second[qid][docid] = float(score)
    return {"pack": pack, "run": run, "bm25": bm25, "second": second, "qrels": load_qrels(pack / "qrels.txt")}


def label_cmd(out: Path, second_run: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "rearank", "synth", "--labels", "grouprank", "--dataset", "dl21",
            "--second-run", str(second_run), "--teacher", "oracle", "--max-queries", str(QUERIES),
            "--samples-per-query", "4", "--output-dir", str(out), "--tokenizer", "none", "--quiet", *extra]


def label(out: Path, second_run: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(label_cmd(out, second_run, *extra), check=False, capture_output=True, text=True, cwd=ROOT, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "REARANK_DATA": str(data_root())})


@pytest.fixture(scope="module")
def labelled(dl21, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("labels")
    done = label(out, dl21["run"])
    assert done.returncode == 0, done.stderr
    return out


def rows(out: Path) -> list[dict]:
    return [row for split in ("train", "val") for row in pq.read_table(out / f"{split}.parquet").to_pylist()]


def traces(out: Path) -> dict[str, dict]:
    lines = (out / "teacher_traces.jsonl").read_text().splitlines()
    return {r["qid"]: r for r in map(json.loads, lines[1:])}


def paper_norm(values):
    low, high = min(values), max(values)
    return [0.0 if high == low else (v - low) / (high - low) for v in values]


def test_rows_hold_s_gt_of_eq_5_and_6_from_the_teachers_answers(dl21, labelled):
    recorded = traces(labelled)
    assert len(recorded) == QUERIES
    expected = {}
    for qid, record in recorded.items():
        # Eq. 5 from the two runs: min-max each run, 0.5 / 0.5, top 50
        bm25, second = dl21["bm25"][qid], dl21["second"][qid]
        nb = dict(zip(bm25, paper_norm(list(bm25.values()))))
        ns = dict(zip(second, paper_norm(list(second.values()))))
        hybrid = {d: 0.5 * nb.get(d, 0.0) + 0.5 * ns.get(d, 0.0) for d in set(bm25) | set(second)}
        top = sorted(hybrid.values(), reverse=True)[:50]
        assert sorted((hybrid[d] for d in record["docids"]), reverse=True) == pytest.approx(top)
        assert record["docids"] != sorted(bm25, key=bm25.get, reverse=True)[:50]  # the fusion changed the pool
        # Eq. 6 from the recorded answers: "Relevance score: X" and the listwise "[i] > [j] > ..." order
        point = [float(re.findall(r"Relevance score: (\d+)", answers[-1])[-1]) for answers in record["point_raw"]]
        answer = record["list_raw"][-1].split("<answer>")[1]
        order = [int(i) - 1 for i in re.findall(r"\[(\d+)\]", answer)]
        rank = {doc: r + 1 for r, doc in enumerate(order)}
        s_list = [-math.log(rank[i]) for i in range(len(point))]
        gt = [0.5 * p + 0.5 * s for p, s in zip(paper_norm(point), paper_norm(s_list))]
        expected.update({(qid, d): v for d, v in zip(record["docids"], gt)})
    all_rows = rows(labelled)
    assert all_rows
    for row in all_rows:
        truth = json.loads(row["reward_model"]["ground_truth"])["labels"]
        qid, docids = row["extra_info"]["qid"], row["extra_info"]["docids"]
        assert truth == pytest.approx([expected[qid, d] for d in docids])
        assert all(0.0 <= v <= 1.0 for v in truth)


def test_oracle_s_gt_rises_with_the_qrels_grade(dl21, labelled):
    by_grade = defaultdict(list)
    for qid, record in traces(labelled).items():
        for docid, value in zip(record["docids"], record["s_gt"]):
            by_grade[dl21["qrels"][qid].get(docid, 0)].append(value)
    means = [sum(v) / len(v) for _, v in sorted(by_grade.items())]
    assert len(means) >= 3
    assert all(a < b for a, b in itertools.pairwise(means)), means


def test_sft_rows_carry_the_teachers_rationale(labelled):
    sft = [json.loads(line) for line in (labelled / "sft_train.jsonl").read_text().splitlines()]
    assert sft
    for row in sft:
        text = row["completion"][0]["content"]
        reason = text.split("<reason>")[1].split("</reason>")[0].strip()
        n = len(row["extra_info"]["docids"])
        assert reason.count("The judged grade is") == n  # the pointwise teacher's words, per document
        assert f"[{n}] " in reason


def test_killed_annotation_resumes_to_the_same_rows(dl21, labelled, tmp_path):
    """A run killed mid-annotation leaves the traces of the finished queries and a torn last line (what a
    SIGKILL during a write leaves); the rerun drops the torn line, annotates the rest and writes the same rows."""
    lines = (labelled / "teacher_traces.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "teacher_traces.jsonl").write_text("".join(lines[:3]) + lines[3][: len(lines[3]) // 2])
    done = label(tmp_path, dl21["run"])
    assert done.returncode == 0, done.stderr
    assert rows(tmp_path) == rows(labelled)
    assert (tmp_path / "teacher_traces.jsonl").read_text() == "".join(lines)


def test_resume_with_other_settings_is_refused(dl21, labelled, tmp_path):
    (tmp_path / "teacher_traces.jsonl").write_text((labelled / "teacher_traces.jsonl").read_text())
    done = label(tmp_path, dl21["run"], "--fusion-weight", "0.3")
    assert done.returncode != 0
    assert "other settings" in done.stderr


def test_sigkilled_run_resumes_to_the_rows_of_an_uninterrupted_one(dl21, tmp_path):
    """A real SIGKILL while the teachers annotate (all dl21 queries), then a rerun: the rows of a clean run."""
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    assert label(clean, dl21["run"], "--max-queries", "60").returncode == 0
    cmd = label_cmd(killed, dl21["run"], "--max-queries", "60")
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "REARANK_DATA": str(data_root())})
    traces_file = killed / "teacher_traces.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if traces_file.is_file() and traces_file.read_text().count("\n") >= 4:  # settings + 3 queries
            break
        time.sleep(0.005)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL  # it died by the kill, not by finishing in between
    finished = traces_file.read_text().count("\n") - 1
    assert 3 <= finished < len(traces(clean))
    assert not (killed / "train.parquet").exists()
    assert label(killed, dl21["run"], "--max-queries", "60").returncode == 0
    assert rows(killed) == rows(clean)
