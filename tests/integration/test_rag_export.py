"""`rearank rag export`: an ir_datasets QA collection (DPR-w100 layout) as DPR ctxs JSONL, built offline from the
shared NQ-open sample (each question's gold passage judged 2, three other questions' passages judged 0)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from ir_datasets.datasets.base import Dataset
from ir_datasets.datasets.dpr_w100 import DprW100Doc, DprW100Queries
from ir_datasets.formats import TrecQrels, TsvDocs
from ir_datasets.util import LocalDownload

from rearank.cli import main
from rearank.errors import RearankError
from rearank.io.qa import load_qa
from rearank.measures.answers import has_answer
from rearank.rag import qa_export
from tests.conftest import require_pack

QUESTIONS = 12


@pytest.fixture
def nq_records() -> list[dict]:
    with gzip.open(require_pack("qa") / "nq-open/nq-open-oracle.jsonl.gz", "rt", encoding="utf-8") as handle:
        return [json.loads(line) for _, line in zip(range(QUESTIONS), handle)]


def local_dpr(records: list[dict], folder: Path) -> Dataset:
    """A dpr-w100-shaped dataset: docs TSV (id, text, title), queries (qid, question, answers...), TREC qrels."""
    docs, queries, qrels = ["id\ttext\ttitle"], [], []
    for i, record in enumerate(records):
        gold = record["ctxs"][0]
        docs.append(f"p{i}\t{gold['text']}\t{gold['title']}")
        queries.append("\t".join([f"q{i}", record["question"], *record["answers"]]))
        qrels.append(f"q{i} 0 p{i} 2")
        qrels.extend(f"q{i} 0 p{(i + d) % len(records)} 0" for d in (1, 2, 3))
    for name, lines in (("docs.tsv", docs), ("queries.tsv", queries), ("qrels", qrels)):
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return Dataset(TsvDocs(LocalDownload(folder / "docs.tsv"), doc_cls=DprW100Doc, namespace="rearank-test-dpr",
                           lang="en", skip_first_line=True),
                   DprW100Queries(LocalDownload(folder / "queries.tsv")),
                   TrecQrels(LocalDownload(folder / "qrels"), {2: "gold", 0: "hard negative"}))


def test_export_gives_questions_answers_judged_passages_and_gold_ids(nq_records, tmp_path):
    out = tmp_path / "nq.jsonl"
    assert qa_export.export_qa(local_dpr(nq_records, tmp_path), out) == QUESTIONS
    items = load_qa(out)
    assert [i.question for i in items] == [r["question"] for r in nq_records]
    assert [list(i.answers) for i in items] == [r["answers"] for r in nq_records]
    for i, (item, record) in enumerate(zip(items, nq_records)):
        assert sorted(p.pid for p in item.passages) == sorted(f"p{(i + d) % QUESTIONS}" for d in range(4))
        assert item.supporting == {f"p{i}"}
        gold = next(p for p in item.passages if p.pid == f"p{i}")
        assert (gold.title, gold.text) == (record["ctxs"][0]["title"], record["ctxs"][0]["text"])
        assert [p.has_answer for p in item.passages] == [
            has_answer(p.text, record["answers"]) for p in item.passages]
    assert sum(gold.has_answer for gold in (next(p for p in it.passages if p.pid in it.supporting) for it in items)) \
        == sum(r["ctxs"][0]["hasanswer"] for r in nq_records)  # DPR's has-answer rule, as the sample marks it
    # the order is shuffled per question (seeded): the gold passage is not always first, and a rerun is identical
    assert {next(j for j, p in enumerate(it.passages) if p.pid in it.supporting) for it in items} != {0}
    again = tmp_path / "again.jsonl"
    qa_export.export_qa(local_dpr(nq_records, tmp_path), again)
    assert again.read_bytes() == out.read_bytes()


def test_limit_seed_and_cli(nq_records, tmp_path, monkeypatch):
    dataset = local_dpr(nq_records, tmp_path)
    monkeypatch.setattr(qa_export, "load_dataset", lambda name: dataset)
    out = tmp_path / "five.jsonl.gz"
    assert main(["rag", "export", "dpr-w100/natural-questions/dev", "--output", str(out), "--limit", "5",
                 "--seed", "3"]) == 0
    assert len(load_qa(out)) == 5
    other = tmp_path / "seed4.jsonl"
    qa_export.export_qa(dataset, other, limit=5, seed=4)
    assert [[p.pid for p in i.passages] for i in load_qa(out)] != [[p.pid for p in i.passages] for i in load_qa(other)]
    assert main(["rag", "export", "x", "--output", str(tmp_path / "x.jsonl"), "--limit", "0"]) == 2


def test_unknown_id_and_answerless_queries_are_one_line_errors(nq_records, tmp_path):
    with pytest.raises(RearankError, match="unknown ir_datasets id 'no/such/qa'"):
        qa_export.load_dataset("no/such/qa")
    records = [dict(r, answers=[]) for r in nq_records[:2]]
    folder = tmp_path / "bad"
    folder.mkdir()
    dataset = local_dpr(records, folder)
    with pytest.raises(RearankError, match="has no answers: not a QA dataset"):
        qa_export.export_qa(dataset, tmp_path / "bad.jsonl")
    assert not (tmp_path / "bad.jsonl").exists()
