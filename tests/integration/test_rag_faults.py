"""RAG under a faulty reader: `rearank rag eval` and the BAR-RAG filter against the fault-injecting server.

Every question is accounted for (an answer, or a failure that is counted), nothing ends in a traceback, and a run
SIGKILLed mid-way and resumed gives the same records (as a multiset) and figures as an uninterrupted one. The server
answers as a function of the prompt only, so with the faults retried away the answers do not depend on which
request met which fault. The commands run in a subprocess, as a user runs them.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from rearank.cli import main
from tests.conftest import ROOT, require_pack
from tests.fault_server import FaultServer
from tests.integration.test_kill_resume import env, finish, kill_at

QA = "hotpotqa/dev_distractor.first103.json"
TRAIN = "hotpotqa/train_distractor.sample100.json"
QUESTIONS, KS = 12, (1, 2)
#: Faults the clients retry, met by the first requests of every chat (so the same on every run, whatever the
#: concurrency): with enough retries every read ends in the good answer.
RETRIED = ["500", "429", "close_mid_body"]
#: Every fault a reader can meet, ``ok`` between them.
ALL_FAULTS = ["ok", "500", "429", "hang", "close_mid_body", "invalid_json", "empty_choices", "ok"]


def first_title(messages: list[dict], index: int = 0) -> str:
    """A reader's answer that depends on its prompt only: the first passage's title (sometimes the gold answer)."""
    found = re.search(r"\(Title: ([^)]*)\)|\[1\][^A-Za-z]*([^\n.]{1,40})", messages[-1]["content"])
    answer = next((g for g in found.groups() if g), "none") if found else "none"
    return f"<think>Doc [1] says so.</think><answer>{answer}</answer>"


def rag_eval(server: FaultServer, out: Path, *extra: str, retries: int = len(RETRIED)) -> list[str]:
    """The command; its timeout_s only bounds a broken run (a good answer that a loaded machine delays past a
    short timeout would be one more failed read): a ``hang`` ends with the server closing the connection."""
    data = require_pack("qa") / QA
    return [sys.executable, "-m", "rearank", "rag", "eval", "--data", str(data), "--limit", str(QUESTIONS),
            "--k", ",".join(map(str, KS)), "--reader", "openai", "--reader-model", "m",
            "-R", f"base_url={server.base_url}", "-R", f"max_retries={retries}", "-R", "backoff_s=0.01",
            "-R", "max_backoff_s=0.05", "-R", "timeout_s=120", "-R", "concurrency=2", "--batch-size", "4",
            "--output-dir", str(out), "--no-progress", *extra]


def items(out: Path) -> Counter:
    """items.jsonl as a multiset of records."""
    return Counter(json.dumps(json.loads(line), sort_keys=True) for line in (out / "items.jsonl").read_text().splitlines())


def metrics(out: Path) -> dict:
    """metrics.json without the recorded settings (they name the test server's port)."""
    return {k: v for k, v in json.loads((out / "metrics.json").read_text()).items() if k != "config"}


def test_rag_eval_counts_every_failed_read_and_finishes(tmp_path):
    """No retries: each fault fails its read; every question still has its record, each failure is counted (a hang
    ends in a closed connection, not in the client's timeout: tests/unit/test_openai_backend.py times out)."""
    out = tmp_path / "faults"
    with FaultServer(cycle=ALL_FAULTS, hang_s=0.5, answer=first_title) as server:
        done = finish(rag_eval(server, out, retries=0))
        faults = sum(n for fault, n in server.served.items() if fault != "ok")
    assert "Traceback" not in done.stderr
    records = [json.loads(line) for line in (out / "items.jsonl").read_text().splitlines()]
    assert len(records) == QUESTIONS == len({r["qid"] for r in records})
    failed = sum(bool(r["k"][str(k)].get("reader_failed")) for r in records for k in KS)
    assert server.requests == QUESTIONS * len(KS) and failed == faults == 6 * QUESTIONS * len(KS) // len(ALL_FAULTS)
    assert sum(m["reader_failed"] for m in metrics(out)["k"].values()) == failed
    assert all(r["k"][str(k)]["em"] == 0.0 for r in records for k in KS if r["k"][str(k)].get("reader_failed"))
    assert f"failed reads (scored as wrong): {failed}" in done.stdout


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("rag") / "full"
    with FaultServer(per_prompt=RETRIED, answer=first_title) as server:
        finish(rag_eval(server, out))
    assert server.served == {**dict.fromkeys(RETRIED, QUESTIONS * len(KS)), "ok": QUESTIONS * len(KS)}
    assert sum(m["reader_failed"] for m in metrics(out)["k"].values()) == 0  # every fault was retried away
    return items(out), metrics(out)


@pytest.mark.parametrize(("gate_at", "torn"), [
    (0, False),  # before any answer
    (40, True),  # mid-way (4 requests a read: the first chunk of 4 questions written), with a torn last record as
    #              a kill mid-write leaves
])
def test_rag_eval_killed_and_resumed_equals_uninterrupted(tmp_path, uninterrupted, gate_at, torn):
    out = tmp_path / "part"
    with FaultServer(per_prompt=RETRIED, gate_at=gate_at, answer=first_title) as server:
        kill_at(rag_eval(server, out), server)
        server.gate_at = None
        server.open_gate()
        if torn:
            with open(out / "items.jsonl", "a") as handle:
                handle.write('{"qid": "torn", "k": {"1": {"pass')
        done = finish(rag_eval(server, out, "--resume"))
    assert "Traceback" not in done.stderr
    assert (items(out), metrics(out)) == uninterrupted


# ---------------------------------------------------------------- the BAR-RAG training filter


def selection(messages: list[dict], index: int) -> str:
    """A selector's n-th sample: 5 of the first 10 documents by a rotation (a valid BAR-RAG selection)."""
    return "<think>x</think><answer>" + ", ".join(f"[{(index + k) % 10 + 1}]" for k in range(5)) + "</answer>"


@pytest.fixture(scope="module")
def selector_rows(tmp_path_factory):
    data = tmp_path_factory.mktemp("barrag") / "sel"
    assert main(["synth", "--method", "barrag-selector", "--qa", str(require_pack("qa") / TRAIN), "--qa-limit", "8",
                 "--tokenizer", "none", "--val-fraction", "0", "--output-dir", str(data), "--quiet"]) == 0
    return data


def barrag_filter(data: Path, out: Path, selector: FaultServer, reader: FaultServer) -> list[str]:
    return [sys.executable, "-m", "rearank", "rag", "barrag", "filter", "--data", str(data), "--output-dir", str(out),
            "--selector-url", selector.base_url, "--selector-model", "sel", "--reader-url", reader.base_url,
            "--reader-model", "reader", "--selector-samples", "4", "--reader-samples", "3", "--questions-in-flight", "2",
            "--quiet"]


def filter_outputs(out: Path) -> tuple[Counter, dict]:
    log = Counter(json.dumps(json.loads(line), sort_keys=True) for line in (out / "filter_log.jsonl").read_text()
                  .splitlines())
    return log, json.loads((out / "filter_stats.json").read_text())


def test_barrag_filter_accounts_for_every_question_under_reader_faults(selector_rows, tmp_path):
    """Retried faults (500, 429, a hang cut by the server, a body cut mid-way) cost nothing; a malformed reply
    (invalid JSON, no choices) fails its question, which is counted and judged on the next run (each question asks
    the reader 4 times: one fault in 3 requests would fail them all)."""
    out = tmp_path / "filtered"
    with FaultServer(answer=selection) as selector, \
            FaultServer(cycle=[*ALL_FAULTS, *["ok"] * 16], hang_s=0.5, answer=first_title) as reader:
        done = subprocess.run(barrag_filter(selector_rows, out, selector, reader), check=False, env=env(),
                              capture_output=True, text=True, timeout=120, cwd=ROOT)
        malformed = reader.served["invalid_json"] + reader.served["empty_choices"]
    assert done.returncode == 1 and done.stderr == "" and malformed > 0  # unfinished: exit 1, rerun to resume
    log = out / "filter_log.jsonl"
    judged = len(log.read_text().splitlines()) if log.is_file() else 0
    found = re.search(r"judged (\d+) of 8 questions.*\n(\d+) question\(s\) failed", done.stdout)
    assert found and int(found[1]) == judged and judged + int(found[2]) == 8 and int(found[2]) >= 1
    with FaultServer(answer=selection) as selector, FaultServer(answer=first_title) as reader:
        done = finish(barrag_filter(selector_rows, out, selector, reader))
    log, stats = filter_outputs(out)
    assert stats["complete"] and stats["judged"] == 8 == sum(log.values()) and "kept" in done.stdout


#: The filter's reader client retries 3 times, waiting 0.5 s, 1 s, 2 s: two faults a chat keep the test short.
FILTER_RETRIED = ["500", "close_mid_body"]


def test_barrag_filter_killed_and_resumed_equals_uninterrupted(selector_rows, tmp_path):
    with FaultServer(answer=selection) as selector, \
            FaultServer(per_prompt=FILTER_RETRIED, answer=first_title) as reader:
        finish(barrag_filter(selector_rows, tmp_path / "full", selector, reader))
        assert reader.served["500"] == reader.served["close_mid_body"] == 8 * 4  # questions x selections
        with FaultServer(per_prompt=FILTER_RETRIED, gate_at=20, answer=first_title) as gated:  # a few judged
            kill_at(barrag_filter(selector_rows, tmp_path / "part", selector, gated), gated)
            gated.gate_at = None
            gated.open_gate()
        assert not (tmp_path / "part" / "filter_stats.json").exists()
        finish(barrag_filter(selector_rows, tmp_path / "part", selector, reader))
    assert filter_outputs(tmp_path / "part") == filter_outputs(tmp_path / "full")
