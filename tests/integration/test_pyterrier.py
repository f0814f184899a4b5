"""PyTerrier: ``bm25 >> RearankTransformer`` on the scifact pack with the oracle backend, through pt.Experiment.

The first stage is the pack's BM25 run as a transformer (Terrier's own retrieval would download jars at run time).
"""

from __future__ import annotations

import pyterrier as pt
import pytest

from rearank.data.packs import load_qrels, load_requests
from rearank.methods.listwise.window import schedule
from rearank.pyterrier import RearankTransformer, qrels_frame, run_frame, topics_frame


def test_bm25_then_oracle_reaches_the_ceiling(scifact):
    requests = load_requests(run=scifact / "run.bm25-flat.top100.trec", topics=scifact / "queries.jsonl",
                             docs=scifact / "corpus.jsonl")
    qrels = load_qrels(scifact / "qrels.test.trec")
    bm25 = pt.Transformer.from_df(run_frame(requests))
    reranker = RearankTransformer(backend="oracle", qrels=qrels)
    calls = []
    generate = reranker.reranker.backend.generate
    reranker.reranker.backend.generate = lambda p, s: calls.append(len(p)) or generate(p, s)
    table = pt.Experiment([bm25, bm25 >> reranker], topics_frame(requests), qrels_frame(qrels),
                          eval_metrics=["ndcg_cut_10"], names=["bm25", "bm25 >> rearank"])
    scores = dict(zip(table["name"], table["ndcg_cut_10"]))
    # README: scifact BM25 0.6789; window-20/step-10 oracle ceiling 0.9265 (`rearank benchmark --backend oracle`).
    assert round(scores["bm25"], 4) == 0.6789
    assert round(scores["bm25 >> rearank"], 4) == 0.9265
    # Every window of the 300 queries (9 for a full top-100; 2697 in all, as a few queries have fewer candidates),
    # batched across queries: 32 windows per backend call (the face's default batch_size).
    windows = sum(len(schedule(len(r.candidates), 20, 10)) for r in requests)
    assert sum(calls) == windows == 2697 and max(calls) == 32 and len(calls) < 300


def test_groupwise_and_frame_shape(scifact):
    requests = load_requests(run=scifact / "run.bm25-flat.top100.trec", topics=scifact / "queries.jsonl",
                             docs=scifact / "corpus.jsonl", max_queries=3, top_k=10)
    qrels = load_qrels(scifact / "qrels.test.trec")
    frame = run_frame(requests)
    out = RearankTransformer(backend="oracle", qrels=qrels, method="groupwise", group_size=10)(frame)
    assert list(out.columns) == list(frame.columns) and len(out) == 30
    for request in requests:
        rows = out[out["qid"] == request.query.qid]
        judged = qrels.get(request.query.qid, {})
        grades = [judged.get(d, 0) for d in rows["docno"]]
        assert grades == sorted(grades, reverse=True)  # one group of 10 scored by the qrels: judged first
        assert list(rows["rank"]) == list(range(10)) and list(rows["score"]) == [(10 - r) / 10 for r in range(10)]
        assert sorted(rows["docno"]) == sorted(c.docid for c in request.candidates)


def test_given_reranker_and_frame_errors():
    import pandas as pd

    from rearank import Reranker
    from rearank.errors import RearankError

    rr = Reranker(backend="oracle", qrels={"1": {"c": 2, "b": 1}})
    transformer = RearankTransformer(rr)
    # Rows out of rank order: the input order is taken from `rank` (a, b, c); the oracle puts c (2), b (1), a (0).
    frame = pd.DataFrame({"qid": ["1", "1", "1"], "query": "q", "docno": ["c", "a", "b"], "text": ["C", "A", "B"],
                          "score": [1.0, 3.0, 2.0], "rank": [2, 0, 1], "extra": [7, 8, 9]})
    out = transformer(frame)
    assert list(out["docno"]) == ["c", "b", "a"] and list(out["extra"]) == [7, 9, 8]
    assert list(out["rank"]) == [0, 1, 2]
    with pytest.raises(RearankError, match="lacks column"):
        transformer(frame.drop(columns=["text"]))
    with pytest.raises(RearankError, match="not both"):
        RearankTransformer(rr, window=4)
