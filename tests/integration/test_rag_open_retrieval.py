"""Open retrieval for `rag eval`: `rag corpus` pools the shared QA samples; `rag eval --corpus` retrieves each
question's candidates with Lucene BM25 exactly as `rearank bm25` does over the same corpus and questions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rearank.cli import main
from rearank.errors import RearankError
from rearank.io.beir import read_corpus, read_queries
from rearank.io.qa import load_qa
from rearank.io.trec import read_run, write_run
from rearank.rag.corpus import passage_id
from rearank.rag.retrieval import Corpus, retrieve
from tests.conftest import require, require_pack

QA_FILES = ("hotpotqa/dev_distractor.first103.json", "hotpotqa/train_distractor.sample100.json",
            "2wikimultihopqa/dev.sample500.jsonl", "musique/dev_ans.sample200.jsonl",
            "musique/train_ans.sample100.json", "nq-open/nq-open-oracle.jsonl.gz")
DEV = "hotpotqa/dev_distractor.first103.json"


@pytest.fixture(scope="module")
def pooled(tmp_path_factory) -> tuple[Path, Path]:
    require("pyserini", "Lucene BM25")
    qa = require_pack("qa")
    out = tmp_path_factory.mktemp("pool")
    corpus, queries = out / "corpus.jsonl", out / "queries.jsonl"
    assert main(["rag", "corpus", "--qa", *(str(qa / f) for f in QA_FILES), "--output", str(corpus),
                 "--queries", str(queries)]) == 0
    return corpus, queries


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("REARANK_CACHE", str(tmp_path_factory.getbasetemp() / "rearank-cache"))


def test_corpus_pools_every_paragraph_once_with_stable_ids(pooled):
    corpus, queries = pooled
    docs = read_corpus(corpus)
    items = [i for f in QA_FILES for i in load_qa(require_pack("qa") / f)]
    distinct = {passage_id(p.title, p.text) for i in items for p in i.passages if p.text.strip()}
    assert set(docs) == distinct and len(docs) < sum(len(i.passages) for i in items)  # repeats pooled once
    assert len(docs) > 10_000  # each gold paragraph now competes with thousands
    first = items[0].passages[1]  # Scott Derrickson, a gold paragraph of the first HotpotQA dev question
    assert docs[passage_id(first.title, first.text)] == (first.title, first.text)
    assert len(read_queries(queries)) == len({i.qid for i in items})


def test_eval_candidates_equal_rearank_bm25_hit_for_hit(pooled, tmp_path):
    corpus, queries = pooled
    out = tmp_path / "open"
    assert main(["rag", "eval", "--data", str(require_pack("qa") / DEV), "--corpus", str(corpus), "--depth", "100",
                 "--selector", "none", "--reader", "gold", "--k", "3,5,25,100", "--output-dir", str(out),
                 "--no-progress"]) == 0
    ours = read_run(out / "candidates.trec")
    assert main(["bm25", "--corpus", str(corpus), "--topics", str(queries), "--output", str(tmp_path / "bm25.trec"),
                 "--k", "100", "--quiet"]) == 0
    theirs = read_run(tmp_path / "bm25.trec")
    assert len(ours) == 103
    for qid, ranked in ours.items():
        assert [d for d, _ in ranked] == [d for d, _ in theirs[qid]], qid
        assert [s for _, s in ranked] == pytest.approx([s for _, s in theirs[qid]])
    metrics = json.loads((out / "metrics.json").read_text())["k"]
    recall = [metrics[k]["answer_recall"] for k in ("3", "5", "25", "100")]
    support = [metrics[k]["support_recall"] for k in ("3", "5", "25", "100")]
    assert recall == sorted(recall) and recall[0] < recall[-1]
    assert support == sorted(support) and support[0] < support[-1]
    # a gold paragraph BM25 finds counts in supporting recall: the records' supporting ids are corpus ids
    records = [json.loads(line) for line in (out / "items.jsonl").read_text().splitlines()]
    found = [r for r in records if set(r["supporting"]) & set(r["k"]["3"]["passages"])]
    assert found and all(r["k"]["3"]["support_recall"] > 0 for r in found)
    assert all(r["ranking"] == [d for d, _ in ours[r["qid"]]] for r in records)  # none = first-stage order


def test_gold_matched_by_text_and_by_id_and_candidates_run(pooled, tmp_path, capsys):
    corpus, _ = pooled
    items = load_qa(require_pack("qa") / DEV, limit=5)
    open_items, run = retrieve(items, Corpus(corpus, progress=False), depth=10)
    for before, after in zip(items, open_items):
        gold = {passage_id(p.title, p.text) for p in before.passages if p.pid in before.supporting}
        assert after.supporting == gold and len(after.passages) == 10
    # a given first stage (here BM25's hits scored in reverse): its order is kept, cut to --depth
    reversed_run = {q: [(d, float(i)) for i, (d, _) in enumerate(r)] for q, r in run.items()}
    again, _ = retrieve(items, Corpus(corpus, progress=False), depth=4, run=reversed_run)
    assert [p.pid for p in again[0].passages] == [d for d, _ in run[items[0].qid][::-1][:4]]
    # ids outside the corpus are refused
    write_run(tmp_path / "bad.trec", {items[0].qid: [("not-a-passage", 1.0)]})
    assert main(["rag", "eval", "--data", str(require_pack("qa") / DEV), "--limit", "1", "--corpus", str(corpus),
                 "--candidates", str(tmp_path / "bad.trec"), "--output-dir", str(tmp_path / "bad"), "--no-progress"]) == 2
    assert "'not-a-passage'" in capsys.readouterr().err


def test_dpr_tsv_corpus_matches_gold_by_id(tmp_path):
    require("pyserini", "Lucene BM25")
    tsv = tmp_path / "psgs_w100.tsv"
    tsv.write_text('id\ttext\ttitle\n1\t"The wall fell in 1989, ""they"" said."\tBerlin Wall\n'
                   "2\tParis has the Eiffel tower.\tParis\n3\tRome has the Colosseum.\tRome\n", encoding="utf-8")
    data = tmp_path / "q.jsonl"
    data.write_text(json.dumps({"id": "q1", "question": "When did the Berlin wall fall?", "answers": ["1989"],
                                "ctxs": [{"id": "1", "title": "Berlin Wall", "text": "(another copy)",
                                          "isgold": True}]}) + "\n", encoding="utf-8")
    (item,) = load_qa(data)
    (after,), _ = retrieve([item], Corpus(tsv, progress=False), depth=2)
    assert after.supporting == {"1"} and after.passages[0].pid == "1"
    assert after.passages[0].text == 'The wall fell in 1989, "they" said.' and after.passages[0].has_answer


@pytest.mark.parametrize(("args", "message"), [
    (["--candidates", "x.trec"], "--candidates needs --corpus"),
    (["--corpus", "missing/corpus.jsonl"], "no such file or folder"),
    (["--corpus", "c.jsonl", "--depth", "0"], "--depth must be at least 1"),
])
def test_bad_retrieval_flags(tmp_path, capsys, args, message):
    data = str(require_pack("qa") / DEV)
    assert main(["rag", "eval", "--data", data, *args, "--output-dir", str(tmp_path / "a"), "--no-progress"]) == 2
    assert message in capsys.readouterr().err
    assert main(["rag", "corpus", "--qa", data, "--output", data]) == 2
    assert f"--output {data} is the input --qa;" in capsys.readouterr().err


def test_index_folder_corpus_reads_stored_documents_or_says_what_to_do(pooled, tmp_path):
    from rearank.data import bm25
    from rearank.rag.retrieval import _raw_passage

    # Pyserini's prebuilt DPR index stores {"id", "contents": "\"Title\"\ntext"}; BEIR-style raw keeps title/text
    assert _raw_passage(json.dumps({"id": "1", "contents": '"Aaron"\nAaron is a prophet.'})) == (
        "Aaron", "Aaron is a prophet.")
    assert _raw_passage(json.dumps({"_id": "d", "title": "T", "text": "x"})) == ("T", "x")
    corpus, _ = pooled
    folder = Corpus(bm25.build_index(corpus, progress=False), progress=False)  # an index folder (no stored raw text)
    assert folder.fingerprint.startswith("index-")
    hits = folder.search({"q": "Scott Derrickson director"}, 3)["q"]
    assert len(hits) == 3
    with pytest.raises(RearankError, match="stores no raw passage text"):
        folder.docs([hits[0][0]])
