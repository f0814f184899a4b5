"""Pack registry, resolution and request loading on small packs written to a temp folder."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from rearank.data import packs
from rearank.errors import MissingDataError, RearankError
from rearank.io import beir, requests_jsonl, topics, trec
from rearank.io.docs import write_docs

RUN = {"q1": [("d1", 3.0), ("d2", 2.0), ("d3", 1.0)], "q2": [("d3", 5.0), ("d4", 4.0)]}
TOPICS = {"q1": "first query", "q2": "second query"}
DOCS = {"d1": ("", "one"), "d2": ("", "two"), "d3": ("", "three"), "d4": ("", "four")}
QRELS = {"q1": {"d1": 2, "d3": 0}, "q2": {"d4": 1}}


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("REARANK_DATA", str(tmp_path))
    return tmp_path


def write_tsv_pack(root: Path, name: str = "dl19") -> packs.Pack:
    pack = packs.pack_paths(packs.REGISTRY[name], root)
    trec.write_run(pack.run, RUN)
    trec.write_qrels(pack.qrels, QRELS)
    topics.write_topics(pack.topics, TOPICS)
    write_docs(pack.docs, DOCS)
    return pack


def write_beir_pack(root: Path, name: str = "beir-scifact") -> packs.Pack:
    pack = packs.pack_paths(packs.REGISTRY[name], root)
    trec.write_run(pack.run, RUN)
    trec.write_qrels(pack.qrels, QRELS)
    beir.write_qrels(pack.dir / "qrels" / "test.tsv", QRELS)
    beir.write_queries(pack.topics, TOPICS)
    beir.write_corpus(pack.docs, {d: (f"title {d}", t) for d, (_, t) in DOCS.items()})
    return pack


def test_registry_names_and_layouts() -> None:
    assert {"dl19", "dl20", "dl21", "dl22", "dl23", "beir-scifact", "beir-trec-covid", "beir-robust04",
            "bright-biology", "bright-theoremqa-questions"} <= set(packs.REGISTRY)
    assert len([n for n in packs.REGISTRY if n.startswith("bright-")]) == 12
    assert len([n for n in packs.REGISTRY if n.startswith("beir-")]) == 7
    assert packs.REGISTRY["dl19"].folder == "msmarco-v1-passage/dl19"
    assert packs.REGISTRY["dl21"].ir_datasets_id == "msmarco-passage-v2/trec-dl-2021/judged"
    assert packs.REGISTRY["beir-scifact"].ir_datasets_id == "beir/scifact/test"
    assert packs.REGISTRY["beir-scifact"].run_file == "run.bm25-flat.top100.trec"
    assert packs.REGISTRY["bright-pony"].ir_datasets_id == "bright/pony"
    assert packs.REGISTRY["beir-robust04"].ir_datasets_id is None
    assert packs.REGISTRY["beir-robust04"].pyserini_topics == "beir-v1.0.0-robust04-test"


def test_data_root_default_and_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("REARANK_DATA", raising=False)
    assert packs.data_root() == Path("~/.cache/rearank/data").expanduser()
    monkeypatch.setenv("REARANK_DATA", str(tmp_path))
    assert packs.data_root() == tmp_path


def test_missing_pack_says_how_to_get_it(root: Path) -> None:
    with pytest.raises(MissingDataError) as info:
        packs.resolve("dl20")
    message = str(info.value)
    assert "rearank data fetch dl20" in message and "REARANK_DATA" in message
    assert str(root / "msmarco-v1-passage" / "dl20") in message


def test_incomplete_pack_names_the_missing_files(root: Path) -> None:
    pack = write_tsv_pack(root)
    pack.docs.unlink()
    with pytest.raises(MissingDataError, match=r"incomplete \(missing docs.tsv\)"):
        packs.resolve("dl19")


def test_unknown_name_lists_known(root: Path) -> None:
    with pytest.raises(RearankError, match="known: dl19, dl20"):
        packs.resolve("dl99")


def test_load_requests_from_tsv_pack(root: Path) -> None:
    write_tsv_pack(root)
    requests = packs.load_requests(dataset="dl19")
    assert [r.query.qid for r in requests] == ["q1", "q2"]
    assert requests[0].query.text == "first query"
    assert [(c.docid, c.score, c.text) for c in requests[0].candidates] == [
        ("d1", 3.0, "one"), ("d2", 2.0, "two"), ("d3", 1.0, "three"),
    ]
    top = packs.load_requests(dataset="dl19", top_k=2, max_queries=1)
    assert len(top) == 1 and [c.docid for c in top[0].candidates] == ["d1", "d2"]


def test_load_requests_from_beir_pack_has_titles(root: Path) -> None:
    pack = write_beir_pack(root)
    assert pack.corpus == pack.docs
    (first, _) = packs.load_requests(dataset="beir-scifact")
    assert first.candidates[0].title == "title d1" and first.candidates[0].text == "one"


def test_explicit_files_override_the_dataset(root: Path) -> None:
    write_tsv_pack(root)
    other = root / "other.trec"
    trec.write_run(other, {"q2": [("d1", 1.0)]})
    requests = packs.load_requests(dataset="dl19", run=other)
    assert [(r.query.qid, [c.docid for c in r.candidates]) for r in requests] == [("q2", ["d1"])]


def test_missing_docs_are_listed_or_skipped(root: Path, caplog: pytest.LogCaptureFixture) -> None:
    pack = write_tsv_pack(root)
    write_docs(pack.docs, {"d1": ("", "one"), "d4": ("", "four")})
    with pytest.raises(MissingDataError) as info:
        packs.load_requests(dataset="dl19")
    assert "3 run candidates" in str(info.value)
    assert "(q1, d2), (q1, d3), (q2, d3)" in str(info.value)
    assert "skip_missing" in str(info.value)
    with caplog.at_level(logging.WARNING, logger="rearank.data.packs"):
        requests = packs.load_requests(dataset="dl19", skip_missing=True)
    assert [[c.docid for c in r.candidates] for r in requests] == [["d1"], ["d4"]]
    assert "3 run candidates" in caplog.text


def test_query_without_topic_is_an_error(root: Path) -> None:
    pack = write_tsv_pack(root)
    topics.write_topics(pack.topics, {"q1": "only one"})
    with pytest.raises(MissingDataError, match="1 queries .* no text .* q2"):
        packs.load_requests(dataset="dl19")


def test_trec_run_needs_topics_and_docs(tmp_path: Path) -> None:
    trec.write_run(tmp_path / "run.trec", RUN)
    with pytest.raises(RearankError, match="needs topics and docs"):
        packs.load_requests(run=tmp_path / "run.trec")
    with pytest.raises(RearankError, match="no run given"):
        packs.load_requests()


def test_request_jsonl_run_is_read_directly(tmp_path: Path) -> None:
    write_tsv_pack(tmp_path)
    source = packs.load_requests(dataset=None, run=tmp_path / "msmarco-v1-passage/dl19/run.bm25.top100.trec",
                                 topics=tmp_path / "msmarco-v1-passage/dl19/topics.tsv",
                                 docs=tmp_path / "msmarco-v1-passage/dl19/docs.tsv")
    requests_jsonl.write_requests(tmp_path / "requests.jsonl.gz", source)
    again = packs.load_requests(run=tmp_path / "requests.jsonl.gz", top_k=2)
    assert again == [type(r)(r.query, r.candidates[:2]) for r in source]


def test_load_qrels_by_name_and_by_path(root: Path) -> None:
    pack = write_beir_pack(root)
    assert packs.load_qrels("beir-scifact") == QRELS
    assert packs.load_qrels(pack.dir / "qrels" / "test.tsv") == QRELS
    assert packs.load_qrels(str(pack.qrels)) == QRELS


def test_topics_and_docs_loaders_follow_the_suffix(root: Path) -> None:
    tsv, jsonl = write_tsv_pack(root), write_beir_pack(root)
    assert packs.load_topics(tsv.topics) == packs.load_topics(jsonl.topics) == TOPICS
    assert packs.load_docs(tsv.docs, ids={"d1"}) == {"d1": ("", "one")}
    assert packs.load_docs(jsonl.docs, ids={"d1"}) == {"d1": ("title d1", "one")}
