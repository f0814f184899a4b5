"""The figures the docs quote, recomputed from the code and the packs, so the pages cannot drift from them."""

from __future__ import annotations

import re

import pytest

from rearank.backends.oracle import OracleBackend
from rearank.data.packs import load_qrels, load_requests
from rearank.io.trec import read_qrels, read_run
from rearank.measures.ir import evaluate
from rearank.run.files import ranked_pairs
from tests.conftest import ROOT
from tests.engines import listwise


def quoted(page: str, pattern: str) -> re.Match:
    match = re.search(pattern, (ROOT / page).read_text(encoding="utf-8"))
    assert match, f"{page} no longer quotes {pattern!r}"
    return match


def oracle_ndcg10(dataset: str) -> tuple[float, float]:
    """nDCG@10 of the pack's BM25 top-100 and of the oracle's rerank of it with the default windows."""
    requests, qrels = load_requests(dataset=dataset), load_qrels(dataset)
    results = listwise(OracleBackend(qrels)).rerank(requests, progress=False)
    before = {r.query.qid: [(c.docid, c.score) for c in r.candidates] for r in requests}
    after = {r.query.qid: ranked_pairs(r) for r in results}
    return (evaluate(qrels, before, ["nDCG@10"]).aggregate["ndcg_cut_10"],
            evaluate(qrels, after, ["nDCG@10"]).aggregate["ndcg_cut_10"])


def test_dl19_bm25_figures(dl19):
    line = quoted("docs/data.md", r"#   (ndcg_cut_1 \S+  ndcg_cut_5 \S+  ndcg_cut_10 \S+  recall_100 \S+  map_cut_100 \S+)").group(1)
    result = evaluate(read_qrels(dl19 / "qrels.txt"), read_run(dl19 / "run.bm25.top100.trec"))
    assert line == "  ".join(f"{name} {value:.4f}" for name, value in result.aggregate.items())


@pytest.mark.parametrize("dataset", ["dl19", "dl21", pytest.param("beir-scifact", marks=pytest.mark.slow)])
def test_oracle_ceilings(dataset, dl19, dl21, scifact, monkeypatch):
    monkeypatch.setenv("REARANK_DATA", str(dl19.parents[1]))
    name = dataset.removeprefix("beir-")
    before, after = quoted("docs/reranking.md", rf"# .*{name} (\d\.\d{{4}}) -> (\d\.\d{{4}})").groups()
    assert tuple(f"{value:.4f}" for value in oracle_ndcg10(dataset)) == (before, after)


def test_dl21_synthesis_counts(dl21, monkeypatch, tmp_path):
    from data_synthesis import SynthConfig, synthesize

    monkeypatch.setenv("REARANK_DATA", str(dl21.parents[1]))
    kept, train, val = (int(x.replace(",", "")) for x in quoted(
        "docs/training-quickstart.md", r"(\d[\d,]*) sets \(train (\d[\d,]*) / val (\d[\d,]*)\)").groups())
    stats = synthesize(load_requests(dataset="dl21"), load_qrels("dl21"), tmp_path, SynthConfig(), progress=False)
    assert (stats["filters"]["kept"], stats["splits"]["train"]["sets"], stats["splits"]["val"]["sets"]) == \
        (kept, train, val)
