"""rag evaluation: selectors, per-item records, resume after an interruption, refusals, paired comparison."""

from __future__ import annotations

import json

import pytest

from rearank.errors import RearankError
from rearank.rag.evaluate import RagEvaluation, compare_runs, markdown_table
from rearank.rag.readers import GoldReader
from rearank.rag.selectors import make_selector
from rearank.types import Passage, QAItem


def item(i: int, gold: set[str]) -> QAItem:
    passages = tuple(Passage(str(j), f"T{j}", f"text {j}" + (" Ann" if str(j) in gold else "")) for j in range(4))
    return QAItem(f"q{i}", f"question {i}?", ("Ann",), passages, frozenset(gold), "hotpotqa")


ITEMS = [item(0, {"2", "3"}), item(1, {"0"}), item(2, {"1", "3"})]


class FailingReader(GoldReader):
    """Oracle that raises on its n-th read call (an interruption)."""

    def __init__(self, fail_on: int) -> None:
        super().__init__(require="all")
        self.calls, self.fail_on = 0, fail_on

    def read(self, batch):
        self.calls += 1
        if self.calls == self.fail_on:
            raise KeyboardInterrupt
        return super().read(batch)


def test_selectors_none_and_oracle():
    assert [p.pid for p in make_selector("none").rank(ITEMS)[0]] == ["0", "1", "2", "3"]
    assert [p.pid for p in make_selector("oracle").rank(ITEMS)[0]] == ["2", "3", "0", "1"]
    with pytest.raises(RearankError, match="unknown selector"):
        make_selector("bm42")
    with pytest.raises(RearankError, match="takes no argument"):
        make_selector("none:x")


def test_records_and_metrics(tmp_path):
    ev = RagEvaluation(tmp_path / "out", {"label": "t"})
    metrics = ev.run(ITEMS, make_selector("none"), GoldReader(require="all"), [1, 2], progress=False)
    # given order, require all: q0 needs 2,3 (not in top-2), q1 needs 0 (top-1), q2 needs 1,3 -> EM@1 = EM@2 = 1/3
    assert metrics["k"]["1"]["em"] == pytest.approx(1 / 3) and metrics["k"]["2"]["em"] == pytest.approx(1 / 3)
    # support recall @2: q0 0/2, q1 1/1, q2 1/2 -> 0.5; answer recall @2: "Ann" in passage 0 (q1) or 1 (q2) -> 2/3
    assert metrics["k"]["2"]["support_recall"] == pytest.approx(0.5)
    assert metrics["k"]["2"]["answer_recall"] == pytest.approx(2 / 3)
    lines = (tmp_path / "out" / "items.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    assert first["ranking"] == ["0", "1", "2", "3"] and first["k"]["2"]["passages"] == ["0", "1"]
    assert first["k"]["1"]["answer"] == "unanswerable"
    assert "| t (ours, on this sample, n=3) | 2 |" in (tmp_path / "out" / "table.md").read_text()


def test_resume_after_interruption(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        RagEvaluation(out, {"a": 1}).run(ITEMS, make_selector("oracle"), FailingReader(2), [1], chunk=1,
                                         progress=False)
    assert len((out / "items.jsonl").read_text().splitlines()) == 1  # the first chunk is on disk
    with pytest.raises(RearankError, match="pass --resume"):
        RagEvaluation(out, {"a": 1})
    with pytest.raises(RearankError, match="other settings"):
        RagEvaluation(out, {"a": 2}, resume=True)
    with open(out / "items.jsonl", "a") as handle:  # a torn line from a kill mid-write
        handle.write('{"qid": "q1", "k": {')
    reader = FailingReader(0)
    metrics = RagEvaluation(out, {"a": 1}, resume=True).run(ITEMS, make_selector("oracle"), reader, [1], chunk=1,
                                                          progress=False)
    assert reader.calls == 2  # only q1 and q2 were read again
    assert metrics["questions"] == 3
    assert [json.loads(x)["qid"] for x in (out / "items.jsonl").read_text().splitlines()] == ["q0", "q1", "q2"]


def test_compare_runs(tmp_path):
    RagEvaluation(tmp_path / "a", {}).run(ITEMS, make_selector("none"), GoldReader("all"), [2], progress=False)
    RagEvaluation(tmp_path / "b", {}).run(ITEMS, make_selector("oracle"), GoldReader("all"), [2], progress=False)
    table = compare_runs(tmp_path / "a", tmp_path / "b", 2, permutations=200)
    # EM@2: A = 1/3 (q1 only), B = 1 -> +66.67, B wins on q0 and q2, ties on q1
    assert "| em | 33.33 | 100.00 | +66.67 |" in table and "| 2/1/0 |" in table
    with pytest.raises(RearankError, match="no question evaluated at k=5"):
        compare_runs(tmp_path / "a", tmp_path / "b", 5)


def test_table_has_paper_figures():
    table = markdown_table({"questions": 1, "k": {"3": dict.fromkeys(
        ("em", "f1", "hit", "answer_recall", "support_recall", "support_all"), 0.5)}}, {"label": "x"}, ["hotpotqa"])
    assert "| 30.03 | 43.22 |" in table and "| x (ours, on this sample, n=1) | 3 | 50.00 |" in table
