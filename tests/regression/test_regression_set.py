"""The recorded-output regression set (:mod:`tests.regression.record`): the replay on the hf backend matches the
record window by window (slow tier), and the check fails, with the drift report, when an answer or the template
changes (shown here on copies, without the model)."""

from __future__ import annotations

import copy
import shutil
from dataclasses import replace

import pytest

from rearank.run.drift import ANSWER, PROMPT
from tests.regression import record


@pytest.fixture
def dl19_env(dl19, monkeypatch):
    monkeypatch.setenv("REARANK_DATA", str(dl19.parents[1]))
    return dl19


@pytest.fixture(scope="module")
def recorded():
    return record.read_record()[1]


def case(name):
    return next(c for c in record.CASES if c.name == name)


def first_prompts(method, requests):
    """The digest of each query's prompts that do not depend on any answer: listwise its first window,
    groupwise every group."""
    out = {}
    for request in requests:
        _, tasks = method.start(request)
        out[request.query.qid] = [task.prompt.digest() for task in tasks]
    return out


def test_the_record_holds_40_listwise_windows_and_a_groupwise_sample(recorded):
    assert sum(map(len, recorded["listwise"].values())) >= 40 and sum(map(len, recorded["groupwise"].values())) >= 4
    assert all(len(t.prompt_digest) == 16 for windows in recorded.values() for ts in windows.values() for t in ts)


def test_the_code_renders_the_recorded_prompts(dl19_env, recorded):
    for c in record.CASES:
        rendered = first_prompts(c.config.ranking_method, record.requests(c))
        for qid, digests in rendered.items():
            assert [t.prompt_digest for t in recorded[c.name][qid][:len(digests)]] == digests, (c.name, qid)


def test_an_edited_answer_fails_with_the_drift_report(recorded):
    edited = copy.deepcopy(recorded["listwise"])
    qid = list(edited)[3]
    edited[qid][2] = replace(edited[qid][2], raw_output=edited[qid][2].raw_output + " ")
    drift = record.drift("listwise", recorded["listwise"], edited)
    assert drift.failures(same_answers=True) == ["1 windows differ (--same-answers)"]
    assert drift.counts[ANSWER] == 1 and f"listwise query {qid} window 2 " in drift.report()
    assert record.drift("listwise", recorded["listwise"], recorded["listwise"]).failures(same_answers=True) == []


def test_a_changed_template_changes_the_prompt_digests_and_fails(dl19_env, recorded):
    method = case("listwise").config.ranking_method
    changed = replace(method, template=replace(method.template, post=method.template.post + "\nBe brief."))
    requests = record.requests(case("listwise"))
    ours, theirs = first_prompts(method, requests), first_prompts(changed, requests)
    assert all(ours[q] != theirs[q] for q in ours)
    replayed = copy.deepcopy(recorded["listwise"])
    for qid, (digest,) in theirs.items():
        replayed[qid][0] = replace(replayed[qid][0], prompt_digest=digest)
    drift = record.drift("listwise", recorded["listwise"], replayed)
    assert drift.counts[PROMPT] == len(theirs)
    assert drift.failures(same_prompts=True) == [f"{len(theirs)} windows were sent another prompt (--same-prompts)"]


def test_re_recording_needs_overwrite_and_prints_what_changed(recorded, tmp_path, monkeypatch, capsys):
    target = tmp_path / "record.jsonl.gz"
    shutil.copy(record.RECORD, target)
    edited = copy.deepcopy(recorded)
    qid = next(iter(edited["groupwise"]))
    edited["groupwise"][qid][1] = replace(edited["groupwise"][qid][1], raw_output="changed")
    monkeypatch.setattr(record, "replay", lambda: edited)
    before = target.read_bytes()
    assert record.main(["--record", str(target)]) == 1
    out = capsys.readouterr()
    assert "1 answer changed" in out.out and "--overwrite" in out.err and target.read_bytes() == before
    assert record.main(["--record", str(target), "--overwrite"]) == 0
    assert "1 answer changed" in capsys.readouterr().out
    assert record.read_record(target)[1]["groupwise"][qid][1].raw_output == "changed"
    monkeypatch.setattr(record, "replay", lambda: recorded)
    assert record.main(["--record", str(target)]) == 1  # the new record is what the next check compares with


@pytest.mark.slow
def test_the_replay_on_the_hf_backend_matches_the_record(dl19_env, recorded):
    header, _ = record.read_record()
    ours = record.run_provenance(record.CASES[0].config)
    for name, windows in record.replay().items():
        drift = record.drift(name, recorded[name], windows, (header["provenance"], ours))
        if drift.failures(same_answers=True):
            pytest.fail(f"the {name} replay differs from {record.RECORD.name}; if intended, re-record with "
                        f"`python -m tests.regression.record --overwrite`\n{drift.report()}", pytrace=False)
