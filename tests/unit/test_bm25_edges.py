"""BM25's own logic with a fake Lucene (no JVM): the indexer's and searcher's calls, the index's cache key and
record, the run's self-removal, cut and order, the refusals and the progress bars, word for word.

The fakes stand in for the Java classes ``rearank.data.bm25`` reaches through ``java.autoclass`` and for
``jnius.JavaException``; tests/integration/test_bm25.py runs the real Lucene.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import types
from collections import namedtuple
from pathlib import Path
from typing import ClassVar

import pytest

from rearank.data import bm25, java
from rearank.errors import FormatError, MissingDataError, RearankError

JAR = "anserini-1.2.3-fatjar.jar"
LOGGER = "rearank.data.bm25"
Hit = namedtuple("Hit", "docid score")


class JavaException(Exception):
    """Stands in for ``jnius.JavaException``."""


class ArrayList(list):
    def add(self, item):
        self.append(item)


class Entry:
    """A ``java.util.Map.Entry`` (the fakes keep Java's method names)."""

    def __init__(self, key, value):
        self.key, self.value = key, value

    def getKey(self):
        return self.key

    def getValue(self):
        return self.value


class JavaMap:
    """What ``SimpleSearcher.batch_search`` returns: a Java map of qid -> hits (entries in reverse order)."""

    def __init__(self, found):
        self.found = found

    def entrySet(self):
        return self

    def toArray(self):
        return [Entry(qid, hits) for qid, hits in reversed(self.found.items())]


class Lucene:
    """Anserini's indexer and searcher, Lucene's IndexSearcher and Java's ArrayList: each call is logged in ``calls``.

    The indexer counts the documents whose contents are not empty (as Anserini skips empty ones); the searcher
    returns the first ``depth`` of ``hits[qid]`` for each qid that has hits, and raises on the query ``FAIL``;
    ``addRawDocuments`` raises on its ``fail_batch``-th call.
    """

    def __init__(self):
        self.calls: list[tuple] = []
        self.hits: dict[str, list[tuple[str, float]]] = {}
        self.unreadable: set[str] = set()
        self.fail_batch = 0
        lucene = self

        class SimpleIndexer:
            def __init__(self, folder, append, threads):
                lucene.calls.append(("indexer", folder, append, threads))

            def addRawDocuments(self, raw):
                lucene.calls.append(("add", list(raw)))
                if len([c for c in lucene.calls if c[0] == "add"]) == lucene.fail_batch:
                    raise RuntimeError("disk full")
                return sum(bool(json.loads(doc)["contents"]) for doc in raw)

            def close(self):
                lucene.calls.append(("close indexer",))

        class SimpleSearcher:
            def __init__(self, path):
                if path in lucene.unreadable:
                    raise JavaException("java.io.IOException: no segments* file found")
                lucene.calls.append(("searcher", path))

            def set_bm25(self, k1, b):
                lucene.calls.append(("bm25", k1, b))

            def batch_search(self, texts, qids, depth, threads):
                lucene.calls.append(("search", list(texts), list(qids), depth, threads))
                if "FAIL" in texts:
                    raise JavaException("TooManyClauses: maxClauseCount is set to 65536\n\tat org.apache.lucene")
                return JavaMap({qid: [Hit(*hit) for hit in lucene.hits[qid][:depth]]
                                for qid in qids if lucene.hits.get(qid)})

            def close(self):
                lucene.calls.append(("close searcher",))

        class IndexSearcher:
            @staticmethod
            def setMaxClauseCount(count):
                lucene.calls.append(("max clauses", count))

        self.classes = {"io.anserini.index.SimpleIndexer": SimpleIndexer,
                        "io.anserini.search.SimpleSearcher": SimpleSearcher,
                        "org.apache.lucene.search.IndexSearcher": IndexSearcher, "java.util.ArrayList": ArrayList}

    def autoclass(self, name):
        return self.classes[name]

    def of(self, kind: str) -> list[tuple]:
        return [call[1:] for call in self.calls if call[0] == kind]


class Bars:
    """Stands in for tqdm: each bar's arguments and updates, in ``made``."""

    made: ClassVar[list[dict]] = []

    def __init__(self, **kwargs):
        self.state = {**kwargs, "updates": []}
        Bars.made.append(self.state)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.state["closed"] = True

    def update(self, n):
        self.state["updates"].append(n)


@pytest.fixture
def lucene(monkeypatch):
    fake = Lucene()
    jnius = types.ModuleType("jnius")
    jnius.JavaException = JavaException
    monkeypatch.setitem(sys.modules, "jnius", jnius)
    monkeypatch.setattr(java, "autoclass", fake.autoclass)
    monkeypatch.setattr(java, "anserini_jar", lambda: Path("/opt/jars") / JAR)
    monkeypatch.setattr(bm25, "tqdm", Bars)
    monkeypatch.setattr(Bars, "made", [])
    monkeypatch.setattr(bm25.os, "cpu_count", lambda: 3)
    return fake


def write_corpus(path: Path, rows: list[tuple[str, str, str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"_id": d, "title": t, "text": x}) + "\n" for d, t, x in rows),
                    encoding="utf-8")
    return path


@pytest.mark.parametrize(("cores", "threads"), [(None, 1), (0, 1), (1, 1), (3, 3), (8, 8), (9, 8), (64, 8)])
def test_default_threads_are_the_cores_from_one_to_eight(monkeypatch, cores, threads):
    monkeypatch.setattr(bm25.os, "cpu_count", lambda: cores)
    assert bm25.default_threads() == threads


def test_flat_contents_joins_a_title_and_its_text_by_a_newline():
    assert bm25.flat_contents("Zebra", "Why stripes.") == "Zebra\nWhy stripes."
    assert bm25.flat_contents("", "Why stripes.") == "Why stripes."


def test_the_cache_key_digests_the_layout_the_jar_and_every_byte(lucene, tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    data = bytes(range(256)) * 5000  # 1.28 MB: more than one 1 MiB block
    corpus.write_bytes(data)
    expected = hashlib.sha256(b"flat-title-newline-text-v1\n" + JAR.encode() + b"\n" + data).hexdigest()
    assert bm25.corpus_digest(corpus) == expected
    assert bm25.corpus_digest(str(corpus)) == expected


def test_a_missing_or_folder_corpus_is_named(lucene, tmp_path):
    absent = tmp_path / "nowhere.jsonl"
    with pytest.raises(MissingDataError) as err:
        bm25.corpus_digest(absent)
    assert str(err.value) == f"{absent}: no such file (give a BEIR corpus.jsonl or a 'docid TAB text' TSV)"
    assert err.value.__cause__ is None and err.value.__suppress_context__
    with pytest.raises(FormatError) as err:
        bm25.corpus_digest(tmp_path)
    assert str(err.value) == f"{tmp_path}: is a directory, expected a corpus file"
    assert err.value.__suppress_context__


def test_the_index_lives_under_the_cache_named_by_folder_and_digest(lucene, tmp_path, monkeypatch):
    corpus = write_corpus(tmp_path / "scifact" / "corpus.jsonl", [("d1", "", "x")])
    name = "scifact-" + bm25.corpus_digest(corpus)[:16]
    assert bm25.index_path(corpus, tmp_path / "c") == tmp_path / "c" / "indexes" / name
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert bm25.index_path(corpus, "~/c") == tmp_path / "home" / "c" / "indexes" / name
    monkeypatch.setenv("REARANK_CACHE", str(tmp_path / "env"))
    assert bm25.index_path(corpus) == tmp_path / "env" / "indexes" / name


def test_a_corpus_in_the_root_folder_is_named_corpus(monkeypatch, tmp_path):
    monkeypatch.setattr(bm25, "corpus_digest", lambda corpus: "0123456789abcdef0123")
    assert bm25.index_path("/corpus.jsonl", tmp_path) == tmp_path / "indexes" / "corpus-0123456789abcdef"


def test_build_indexes_each_document_once_and_records_the_index(lucene, tmp_path, caplog):
    corpus = write_corpus(tmp_path / "pack" / "corpus.jsonl",
                          [("d1", "Café", "Crème brûlée."), ("d2", "", "Penguins swim."), ("d3", "", "")])
    with caplog.at_level(logging.INFO, logger=LOGGER):
        index = bm25.build_index(corpus, cache=tmp_path / "cache", progress=False)

    assert index == bm25.index_path(corpus, tmp_path / "cache") and index.is_dir()
    (folder, append, threads), = lucene.of("indexer")
    assert (Path(folder).parent, Path(folder).name.startswith(f".{index.name}."), append, threads) == (
        index.parent, True, False, 3)  # a temporary folder beside the index; cores (3) threads
    assert lucene.of("add") == [([
        '{"id": "d1", "contents": "Café\\nCrème brûlée."}', '{"id": "d2", "contents": "Penguins swim."}',
        '{"id": "d3", "contents": ""}'],)]
    assert lucene.of("close indexer") == [()]
    assert Bars.made == [{"total": 3, "unit": "doc", "desc": "bm25 index", "disable": True, "updates": [3],
                          "closed": True}]
    assert (index / "rearank-index.json").read_text(encoding="utf-8") == (
        "{\n"
        f' "corpus": {json.dumps(str(corpus.resolve()))},\n'
        ' "documents": 2,\n'
        ' "layout": "flat-title-newline-text-v1",\n'
        f' "anserini": "{JAR}"\n'
        "}\n")
    assert caplog.record_tuples == [(LOGGER, logging.WARNING, f"{corpus}: 1 empty documents were not indexed")]
    assert [p.name for p in index.parent.iterdir()] == [index.name]


def test_a_built_index_is_reused_without_indexing(lucene, tmp_path, caplog):
    corpus = write_corpus(tmp_path / "corpus.jsonl", [("d1", "", "Penguins swim.")])
    index = bm25.index_path(corpus, tmp_path)
    index.mkdir(parents=True)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert bm25.build_index(corpus, cache=tmp_path, threads=2) == index
    assert lucene.calls == [] and Bars.made == []
    assert caplog.record_tuples == [(LOGGER, logging.INFO, f"reusing BM25 index {index}")]


def test_a_full_corpus_builds_silently_with_the_threads_and_bar_asked(lucene, tmp_path, caplog):
    corpus = write_corpus(tmp_path / "corpus.jsonl", [("d1", "", "Penguins swim."), ("d2", "Moon", "")])
    with caplog.at_level(logging.INFO, logger=LOGGER):
        index = bm25.build_index(corpus, cache=tmp_path, threads=2)
    assert caplog.record_tuples == []
    assert [call[2:] for call in lucene.calls if call[0] == "indexer"] == [(False, 2)]
    assert Bars.made[0]["disable"] is False and Bars.made[0]["updates"] == [2]
    assert json.loads((index / "rearank-index.json").read_text())["documents"] == 2


def test_documents_go_to_java_in_batches_whose_counts_add_up(lucene, tmp_path, monkeypatch):
    monkeypatch.setattr(bm25, "_INDEX_BATCH", 2)
    corpus = write_corpus(tmp_path / "corpus.jsonl", [(f"d{i}", "", f"text {i}") for i in range(5)])
    index = bm25.build_index(corpus, cache=tmp_path, progress=False)
    assert [len(raw) for raw, in lucene.of("add")] == [2, 2, 1]
    assert Bars.made[0]["updates"] == [2, 2, 1]
    assert json.loads((index / "rearank-index.json").read_text())["documents"] == 5


def test_the_indexer_is_closed_and_the_partial_index_removed_on_failure(lucene, tmp_path, monkeypatch):
    monkeypatch.setattr(bm25, "_INDEX_BATCH", 2)
    corpus = write_corpus(tmp_path / "corpus.jsonl", [(f"d{i}", "", f"text {i}") for i in range(5)])
    lucene.fail_batch = 3
    with pytest.raises(RuntimeError, match="disk full"):
        bm25.build_index(corpus, cache=tmp_path, progress=False)
    assert [len(raw) for raw, in lucene.of("add")] == [2, 2, 1]
    assert lucene.calls[-1] == ("close indexer",)
    assert Bars.made[0]["updates"] == [2, 2]
    assert list((tmp_path / "indexes").iterdir()) == []


def test_an_empty_corpus_is_refused(lucene, tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("", encoding="utf-8")
    with pytest.raises(FormatError) as err:
        bm25.build_index(corpus, cache=tmp_path)
    assert str(err.value) == f"{corpus}: the corpus holds no documents"
    assert lucene.calls == []


def test_search_asks_lucene_once_per_batch_with_bm25_and_the_clause_limit(lucene, tmp_path, monkeypatch):
    monkeypatch.setattr(bm25, "_SEARCH_BATCH", 2)
    lucene.hits = {"q1": [("q1", 9.0), ("d2", 5.5), ("d3", 4.0), ("d4", 3.0)], "q2": [("d9", 2.0)],
                   "q3": [("d1", 7.0), ("d2", 6.0), ("d3", 5.0), ("d4", 4.0)]}
    run = bm25.search(tmp_path, {"q3": "moon", "q1": "penguins", "q2": "stars"}, k=2, k1=1.2, b=0.75, threads=5)

    assert run == {"q3": [("d1", 7.0), ("d2", 6.0)], "q1": [("d2", 5.5), ("d3", 4.0)], "q2": [("d9", 2.0)]}
    assert list(run) == ["q3", "q1", "q2"]  # the queries' order, not Lucene's
    assert lucene.calls == [
        ("searcher", str(tmp_path)), ("max clauses", 65536), ("bm25", 1.2, 0.75),
        ("search", ["moon", "penguins"], ["q3", "q1"], 3, 5), ("search", ["stars"], ["q2"], 3, 5),
        ("close searcher",)]
    assert Bars.made == [{"total": 3, "unit": "query", "desc": "bm25 search", "disable": False, "updates": [2, 1],
                          "closed": True}]


def test_search_defaults_keep_a_hundred_and_drop_the_query_itself(lucene, tmp_path):
    lucene.hits = {"q1": [("q1", 9.0)] + [(f"d{i}", 100.0 - i) for i in range(120)]}
    run = bm25.search(tmp_path, {"q1": "penguins"})
    assert run == {"q1": [(f"d{i}", 100.0 - i) for i in range(100)]}
    assert lucene.of("bm25") == [(0.9, 0.4)]
    assert [call[2:] for call in lucene.of("search")] == [(101, 3)]
    assert Bars.made[0]["disable"] is False


def test_kept_self_hits_and_scores_as_floats(lucene, tmp_path):
    lucene.hits = {"q1": [("q1", 9), ("d2", 5), ("d3", 4)]}
    run = bm25.search(tmp_path, {"q1": "penguins"}, k=2, remove_self=False, progress=False)
    assert run == {"q1": [("q1", 9.0), ("d2", 5.0)]}
    assert all(type(score) is float for _, score in run["q1"])
    assert [call[2] for call in lucene.of("search")] == [2]
    assert Bars.made[0]["disable"] is True


def test_k_of_one_is_the_least(lucene, tmp_path):
    lucene.hits = {"q1": [("q1", 9.0), ("d2", 5.0), ("d3", 4.0)]}
    assert bm25.search(tmp_path, {"q1": "x"}, k=1, progress=False) == {"q1": [("d2", 5.0)]}
    with pytest.raises(RearankError) as err:
        bm25.search(tmp_path, {"q1": "x"}, k=0)
    assert str(err.value) == "k must be at least 1, got 0"


def test_queries_without_hits_are_left_out_with_one_warning(lucene, tmp_path, caplog):
    lucene.hits = {"a": [("d1", 1.0)], "self": [("self", 3.0)]}
    with caplog.at_level(logging.INFO, logger=LOGGER):
        run = bm25.search(tmp_path, {"a": "x", "b": "the", "self": "y"}, progress=False)
    assert run == {"a": [("d1", 1.0)]}
    assert caplog.record_tuples == [
        (LOGGER, logging.WARNING, "2 of 3 queries retrieved no document (empty or only stopwords)")]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert bm25.search(tmp_path, {"a": "x"}, progress=False) == {"a": [("d1", 1.0)]}
    assert caplog.record_tuples == []


def test_a_lucene_failure_names_the_batch_and_closes_the_searcher(lucene, tmp_path):
    with pytest.raises(RearankError) as err:
        bm25.search(tmp_path, {"q7": "x", "q8": "FAIL", "q9": "y"}, progress=False)
    assert str(err.value) == "Lucene failed on a query among q7..q9: TooManyClauses: maxClauseCount is set to 65536"
    assert err.value.__suppress_context__ and err.value.__cause__ is None
    assert lucene.calls[-1] == ("close searcher",)


def test_an_unreadable_index_is_named(lucene, tmp_path):
    lucene.unreadable = {str(tmp_path)}
    with pytest.raises(RearankError) as err:
        bm25.search(tmp_path, {"q": "zebra"}, progress=False)
    assert str(err.value) == (f"{tmp_path}: not a readable Lucene index (java.io.IOException: no segments* file "
                              "found); delete the folder to rebuild it")
    assert err.value.__suppress_context__
    assert lucene.calls == []


def test_bm25_run_builds_then_searches_with_the_settings_given(lucene, tmp_path, monkeypatch):
    corpus = write_corpus(tmp_path / "corpus.jsonl", [("d1", "", "Penguins swim."), ("q1", "", "Birds.")])
    monkeypatch.setenv("REARANK_CACHE", str(tmp_path / "env"))
    lucene.hits = {"q1": [("q1", 2.0), ("d1", 1.0)]}
    assert bm25.bm25_run(corpus, {"q1": "birds"}) == {"q1": [("d1", 1.0)]}
    index = bm25.index_path(corpus, tmp_path / "env")
    assert lucene.of("searcher") == [(str(index),)]
    assert [call[1:] for call in lucene.of("indexer")] == [(False, 3)]
    assert lucene.of("bm25") == [(0.9, 0.4)] and [call[2:] for call in lucene.of("search")] == [(101, 3)]
    assert [bar["disable"] for bar in Bars.made] == [False, False]

    lucene.calls.clear()
    Bars.made.clear()
    run = bm25.bm25_run(corpus, {"q1": "birds"}, k=1, k1=1.5, b=0.5, threads=2, remove_self=False,
                        cache=tmp_path / "c", progress=False)
    assert run == {"q1": [("q1", 2.0)]}
    assert lucene.of("searcher") == [(str(bm25.index_path(corpus, tmp_path / "c")),)]
    assert [call[1:] for call in lucene.of("indexer")] == [(False, 2)]
    assert lucene.of("bm25") == [(1.5, 0.5)] and [call[2:] for call in lucene.of("search")] == [(1, 2)]
    assert [bar["disable"] for bar in Bars.made] == [True, True]


def test_bm25_run_refuses_no_queries(lucene, tmp_path):
    with pytest.raises(RearankError) as err:
        bm25.bm25_run(tmp_path / "corpus.jsonl", {})
    assert str(err.value) == "no queries to search"
    assert lucene.calls == []
