"""The oracle backend through the real driver on dl19's BM25 top-100 reaches each query's ideal nDCG@10."""

import pytest

from rearank.backends.base import Prompt, SamplingSettings
from rearank.backends.oracle import OracleBackend
from rearank.data.packs import load_requests
from rearank.errors import RearankError
from rearank.io.trec import read_qrels
from rearank.measures.ir import evaluate
from rearank.measures.ndcg import ideal_dcg_at_k, ndcg_at_k
from rearank.methods.listwise.method import Listwise
from rearank.run.files import ranked_pairs
from tests.engines import listwise


def test_oracle_reaches_the_ideal_ndcg10_of_every_candidate_set(dl19):
    requests = load_requests(run=dl19 / "run.bm25.top100.trec", topics=dl19 / "topics.tsv", docs=dl19 / "docs.tsv")
    qrels = read_qrels(dl19 / "qrels.txt")
    results = listwise(OracleBackend(qrels), batch_size=16).rerank(requests, progress=False)
    run = {r.query.qid: ranked_pairs(r) for r in results}
    measured = evaluate(qrels, run, ["nDCG@10"]).per_query
    before = evaluate(qrels, {r.query.qid: [(c.docid, c.score) for c in r.candidates] for r in requests}, ["nDCG@10"])
    judged = [r for r in requests if r.query.qid in qrels]
    assert len(judged) == 43
    for req in judged:
        labels = [qrels[req.query.qid].get(c.docid, 0) for c in req.candidates]
        pool_ideal = ideal_dcg_at_k(list(qrels[req.query.qid].values()))
        best = ndcg_at_k(sorted(labels, reverse=True), ideal=pool_ideal)
        assert measured[req.query.qid]["ndcg_cut_10"] == pytest.approx(best, abs=1e-9), req.query.qid
    mean = sum(m["ndcg_cut_10"] for m in measured.values()) / len(measured)
    assert mean > before.aggregate["ndcg_cut_10"] + 0.2  # BM25 0.5058 -> the candidates' ceiling
    assert all(t.status == "ok" for r in results for t in r.traces)
    assert sum(len(r.traces) for r in results) == 9 * len(requests)  # 100 candidates: 9 windows each


def test_oracle_answer_is_well_formed_and_keeps_ties_in_order():
    qrels = {"q": {"a": 2, "c": 1, "d": 2}}
    prompt = Prompt(messages=({"role": "user", "content": "x"},), qid="q", docids=("a", "b", "c", "d", "e"))
    (gen,) = OracleBackend(qrels).answer_format(Listwise()).generate([prompt], SamplingSettings())
    assert gen.text.startswith("<think>") and gen.text.endswith("<answer>[1] > [4] > [3] > [2] > [5]</answer>")
    assert gen.finish_reason == "stop"


def test_an_oracle_bound_to_no_method_says_to_bind_it():
    prompt = Prompt(messages=({"role": "user", "content": "x"},), qid="q", docids=("a", "b"))
    with pytest.raises(RearankError, match=r"bind it first with backend\.answer_format\(method\)"):
        OracleBackend({"q": {"a": 1}}).generate([prompt], SamplingSettings())
