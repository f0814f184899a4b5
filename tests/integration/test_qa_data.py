"""Every shared QA file loads; counts, id schemes and gold labels match the data README."""

from __future__ import annotations

import pytest

from rearank.io.qa import load_qa
from tests.conftest import require_pack

FILES = {  # file -> (questions, source, most passages per question)
    "hotpotqa/dev_distractor.first103.json": (103, "hotpotqa", 10),
    "hotpotqa/dev_distractor.sample200.jsonl": (200, "hotpotqa", 10),
    "hotpotqa/train_distractor.sample100.json": (100, "hotpotqa", 10),
    "2wikimultihopqa/dev.sample500.jsonl": (500, "2wiki", 10),
    "musique/dev_ans.sample200.jsonl": (200, "musique", 20),
    "musique/train_ans.sample100.json": (100, "musique", 20),
    "nq-open/nq-open-oracle.jsonl.gz": (2655, "dpr", 1),
}


@pytest.mark.parametrize("name", sorted(FILES))
def test_load_every_file(name):
    path = require_pack("qa") / name
    count, source, width = FILES[name]
    items = load_qa(path)
    assert len(items) == count
    assert {i.source for i in items} == {source}
    assert len({i.qid for i in items}) == count
    for item in items:
        assert item.answers and all(a.strip() for a in item.answers)
        pids = [p.pid for p in item.passages]
        assert len(pids) == len(set(pids))
        assert item.supporting <= set(pids)
        assert item.supporting, f"{item.qid} has no supporting passage"
        if source in ("hotpotqa", "2wiki", "musique"):
            assert 2 <= len(pids) <= width  # a few HotpotQA records ship fewer than 10
    if source == "dpr":
        assert all(i.passages[0].has_answer is not None for i in items)


def test_hotpotqa_first_record():
    (item,) = load_qa(require_pack("qa") / "hotpotqa/dev_distractor.first103.json", limit=1)
    # Scott Derrickson and Ed Wood are paragraphs 1 and 4 of the first record's context
    assert item.qid == "5a8b57f25542995d1e6f1371" and item.answers == ("yes",)
    assert item.supporting == {"1", "4"}
    assert item.passage("4").title == "Ed Wood"


def test_answer_recall_agrees_with_dpr_hasanswer():
    """Our answer recall against the ``hasanswer`` flags DPR's own tokenizer computed (an independent tool)."""
    from rearank.measures.answers import answer_recall

    items = load_qa(require_pack("qa") / "nq-open/nq-open-oracle.jsonl.gz")
    agree = sum(answer_recall([i.passages[0].text], i.answers, 1) == float(i.passages[0].has_answer) for i in items)
    assert agree == len(items) == 2655  # DPR's rule (NFD, DrQA's tokenizer, passage text): every flag reproduced
