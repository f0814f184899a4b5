"""R2MED packs (``rearank data fetch r2med-<task>``): MTEB's Hugging Face copies read through ``datasets`` and a BM25
run from a local index of the corpus. No hub here, so the HF reader is given the real SciFact pack in the same
MTEB layout (configs queries / corpus / qrels as JSON lines); the pack it builds must hold SciFact's queries,
judgments and corpus, and its BM25 run must score what the shared SciFact BM25 run scores."""

from __future__ import annotations

import json

import pytest

from rearank.data.fetch import HFRetrievalDataset, corpus_bm25, fetch_pack
from rearank.data.packs import REGISTRY, load_qrels, spec_of
from rearank.io.trec import read_run
from rearank.measures.ir import evaluate
from tests.conftest import require, require_pack


def test_every_r2med_task_is_registered_with_its_mteb_dataset():
    names = [n for n in REGISTRY if n.startswith("r2med-")]
    assert len(names) == 8  # the paper's Table II columns
    assert spec_of("r2med-pmc-clinical").hf_dataset == "mteb/R2MEDPMCClinicalRetrieval"
    assert all(spec_of(n).layout == "beir" and spec_of(n).ir_datasets_id is None for n in names)


def test_r2med_fetch_builds_a_pack_from_an_hf_layout_dataset(tmp_path):
    datasets = require("datasets", "the `train` extra")
    scifact = require_pack("beir/scifact")
    hf = tmp_path / "hf"
    hf.mkdir()
    qrels = load_qrels(scifact / "qrels.test.trec")
    (hf / "qrels.jsonl").write_text("".join(json.dumps({"query-id": q, "corpus-id": d, "score": g}) + "\n"
                                            for q, judged in qrels.items() for d, g in judged.items()))
    (hf / "queries.jsonl").write_text((scifact / "queries.jsonl").read_text())
    (hf / "corpus.jsonl").write_text((scifact / "corpus.jsonl").read_text())

    def load(name, config, split):
        assert (name, split) == ("mteb/R2MEDBiologyRetrieval", "test")
        return datasets.load_dataset("json", data_files=str(hf / f"{config}.jsonl"), split="train",
                                     cache_dir=str(tmp_path / "hf-cache"))

    dataset = HFRetrievalDataset(spec_of("r2med-biology").hf_dataset, load=load)
    pack = fetch_pack("r2med-biology", tmp_path / "packs", dataset=dataset, bm25=corpus_bm25(dataset, tmp_path))
    assert load_qrels(pack.qrels) == {q: j for q, j in qrels.items() if j}
    ours = evaluate(qrels, read_run(pack.run)).aggregate["ndcg_cut_10"]
    shared = evaluate(qrels, read_run(scifact / "run.bm25-flat.top100.trec")).aggregate["ndcg_cut_10"]
    assert ours == pytest.approx(shared, abs=0.005)


def test_r2med_suite_and_the_papers_figures_name_registered_packs():
    from importlib import resources

    from benchmark.suites import expand

    assert expand("r2med") == [n for n in REGISTRY if n.startswith("r2med-")]
    figures = json.loads(resources.files("benchmark").joinpath("paper_figures_grouprank.json").read_text())
    for table in figures["tables"].values():
        assert all(c in REGISTRY for c in table["columns"] if not c.startswith(("avg", "bright-avg")))
        for row in table["rows"].values():
            assert len(row) == len(table["columns"])
    bright = figures["tables"]["table1_bright"]["rows"]["GroupRank-7B"]
    assert sum(bright[:-1]) / 12 == pytest.approx(bright[-1], abs=0.01)  # the paper's average of its 12 columns
