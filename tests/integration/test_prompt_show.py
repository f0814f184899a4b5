"""``rearank prompt show``: one window of a dl19 query as a builtin template renders it (issue 10).

Expected passages are read straight from the pack's files (run and docs.tsv), not through rearank's loaders.
"""

from __future__ import annotations

import re

import pytest

from rearank.cli import main


@pytest.fixture
def pack(dl19, monkeypatch):
    monkeypatch.setenv("REARANK_DATA", str(dl19.parents[1]))
    first_qid = (dl19 / "run.bm25.top100.trec").read_text().split(maxsplit=1)[0]
    top3 = [line.split()[2] for line in (dl19 / "run.bm25.top100.trec").read_text().splitlines()
            if line.split()[0] == first_qid][:3]
    texts = {}
    for line in (dl19 / "docs.tsv").read_text(encoding="utf-8").splitlines():
        docid, _, text = line.partition("\t")
        if docid in top3:
            texts[docid] = " ".join(text.split())
    topics = dict(line.split("\t", 1) for line in (dl19 / "topics.tsv").read_text(encoding="utf-8").splitlines())
    return first_qid, topics[first_qid], [texts[d] for d in top3]


def messages(out: str) -> list[tuple[str, str]]:
    """(role, content) of every message `prompt show` printed."""
    parts = re.split(r"\n--- \[\d+\] (system|user|assistant) \(\d+ characters\)\n", out)
    return [(role, content.rstrip("\n")) for role, content in zip(parts[1::2], parts[2::2])]


@pytest.mark.parametrize(("template", "cut", "acks"), [("rearank", 400, True), ("rankgpt", 300, False)])
def test_show_prints_the_released_layout_and_budget(pack, capsys, template, cut, acks):
    qid, query, texts = pack
    assert main(["prompt", "show", "--template", template, "--dataset", "dl19", "--query", qid, "--window", "3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"# dl19 query {qid}, passages 1-3, template {template}, passage budget {cut} characters")
    shown = messages(out)
    # system; task exchange (user, assistant); per passage a user turn (+ an acknowledgement); final user turn
    roles = ["system", "user", "assistant"] + (["user", "assistant"] if acks else ["user"]) * 3 + ["user"]
    assert [role for role, _ in shown] == roles
    passages = [content for role, content in shown[3:-1] if role == "user"]
    assert passages == [f"[{i}] {text[:cut]}" for i, text in enumerate(texts, 1)]
    assert len(texts[0]) > cut  # the first passage is cut, the budget is not vacuous
    assert query in shown[1][1] + shown[-1][1] and "3 passages" in shown[-1][1]


def test_show_by_position_and_errors(pack, capsys):
    qid, _, _ = pack
    assert main(["prompt", "show", "--template", "rankgpt", "--dataset", "dl19", "--query", "1", "--window", "2"]) == 0
    assert capsys.readouterr().out.startswith(f"# dl19 query {qid}, passages 1-2")
    assert main(["prompt", "show", "--template", "rankgpt", "--dataset", "dl19", "--query", "no-such-qid"]) == 2
    err = capsys.readouterr().err
    assert "'no-such-qid' is not in dl19" in err and "Traceback" not in err
