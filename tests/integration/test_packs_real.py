"""The shared real packs load through rearank.data.packs, and our writers reproduce their files."""

from __future__ import annotations

from pathlib import Path

import pytest

from rearank.data import packs
from rearank.io import beir, requests_jsonl, topics, trec
from rearank.io.docs import read_docs, write_docs


@pytest.fixture
def shared_root(dl19: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = dl19.parents[1]
    monkeypatch.setenv("REARANK_DATA", str(root))
    return root


@pytest.mark.parametrize("name,queries,candidates", [("dl19", 43, 4300), ("dl21", 53, 5300),
                                                     ("beir-scifact", 300, 29966)])
def test_pack_loads_completely(shared_root: Path, name: str, queries: int, candidates: int) -> None:
    pack = packs.resolve(name)
    requests = packs.load_requests(dataset=name)
    assert len(requests) == queries
    assert sum(len(r.candidates) for r in requests) == candidates
    assert all(r.query.text and all(c.text for c in r.candidates) for r in requests)
    run = trec.read_run(pack.run)
    for request in requests:
        assert [(c.docid, c.score) for c in request.candidates] == run[request.query.qid]
    assert set(packs.load_qrels(name)) == {r.query.qid for r in requests}


def test_beir_pack_has_titles_and_both_qrels(shared_root: Path, scifact: Path) -> None:
    (first, *_) = packs.load_requests(dataset="beir-scifact", max_queries=1)
    assert all(c.title for c in first.candidates)
    corpus = beir.read_corpus(scifact / "corpus.jsonl")
    assert len(corpus) == 5183
    assert beir.read_qrels(scifact / "qrels" / "test.tsv") == trec.read_qrels(scifact / "qrels.test.trec")
    assert len(beir.read_queries(scifact / "queries.jsonl")) == 300


@pytest.mark.parametrize("fixture,run,tag", [("dl19", "run.bm25.top100.trec", "rank"),
                                             ("scifact", "run.bm25-flat.top100.trec", "Anserini")])
def test_run_rewrites_byte_identical(request: pytest.FixtureRequest, tmp_path: Path, fixture: str, run: str,
                                     tag: str) -> None:
    source = request.getfixturevalue(fixture) / run
    trec.write_run(tmp_path / "run.trec", trec.read_run(source), tag=tag)
    assert (tmp_path / "run.trec").read_bytes() == source.read_bytes()


def test_dl21_ties_are_reordered_as_trec_eval(dl21: Path, tmp_path: Path) -> None:
    """The dl21 run lists some tied passages in docid-ascending order; trec_eval (and we) rank them descending."""
    source = dl21 / "run.bm25.top100.trec"
    trec.write_run(tmp_path / "run.trec", trec.read_run(source), tag="rank")

    def unranked(path: Path) -> set[tuple[str, ...]]:
        return {tuple(line.split()[:3] + line.split()[4:]) for line in path.read_text().splitlines()}

    assert unranked(tmp_path / "run.trec") == unranked(source)


def test_topics_and_docs_rewrite_identical(dl19: Path, tmp_path: Path) -> None:
    topics.write_topics(tmp_path / "topics.tsv", topics.read_topics(dl19 / "topics.tsv"))
    assert (tmp_path / "topics.tsv").read_bytes() == (dl19 / "topics.tsv").read_bytes()
    docs = read_docs(dl19 / "docs.tsv")
    write_docs(tmp_path / "docs.tsv.gz", docs)
    assert read_docs(tmp_path / "docs.tsv.gz") == docs


def test_requests_jsonl_round_trip_on_real_pack(shared_root: Path, tmp_path: Path) -> None:
    requests = packs.load_requests(dataset="beir-scifact", max_queries=20, top_k=20)
    requests_jsonl.write_requests(tmp_path / "scifact.jsonl", requests)
    assert requests_jsonl.read_requests(tmp_path / "scifact.jsonl") == requests
    assert packs.load_requests(run=tmp_path / "scifact.jsonl", top_k=5)[3].candidates == requests[3].candidates[:5]
