"""BM25 first-stage retrieval with Lucene through Pyserini's Anserini, as Pyserini's BEIR "flat" runs are made.

Each document is indexed as one field, title and text joined by a newline (what Anserini's
``BeirFlatCollection`` does), with Anserini's default analyzer (Porter stemming, English stopwords). Queries are
bags of words scored with BM25 (k1=0.9, b=0.4); a query's own id is removed from its hits (BEIR's rule for
corpora whose queries are documents too), retrieving one hit more so that ``k`` remain.

Indexes are built once into ``<cache>/indexes/`` (cache: ``$REARANK_CACHE``, else ``~/.cache/rearank``) under a
digest of the corpus file's bytes, and reused while that file is unchanged. Anserini's ``SimpleIndexer`` and
``SimpleSearcher`` are used directly (they are what Pyserini's ``LuceneIndexer``/``LuceneSearcher`` wrap):
importing ``pyserini.search.lucene`` costs ~10 s of torch/transformers imports and needs an OpenAI key.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from itertools import islice
from pathlib import Path
from typing import TypeVar

from tqdm import tqdm

from rearank.cache import cache_root
from rearank.data import java
from rearank.data.packs import load_docs
from rearank.errors import FormatError, MissingDataError, RearankError
from rearank.io.files import PathLike, atomic_folder
from rearank.types import Run

log = logging.getLogger("rearank.data.bm25")

K1 = 0.9
B = 0.4
DEFAULT_K = 100
MAX_QUERY_TERMS = 1 << 16  # Lucene's clause limit while searching (its default, 1024, fails long queries)
#: Part of every index's cache key: change it when what gets indexed changes, so old indexes are not reused.
INDEX_LAYOUT = "flat-title-newline-text-v1"
_INDEX_BATCH = 5000  # documents per call into Java
_SEARCH_BATCH = 256  # queries per call into Java (the progress bar's step)
T = TypeVar("T")


def default_threads() -> int:
    """Threads for indexing and search: the machine's cores, at most 8."""
    return max(1, min(os.cpu_count() or 1, 8))


def flat_contents(title: str, text: str) -> str:
    """One document's indexed text: title and text joined by a newline, as Anserini's BeirFlatCollection does."""
    return f"{title}\n{text}" if title else text


def corpus_digest(corpus: PathLike) -> str:
    """A hex digest of the corpus file's bytes, the index layout and Anserini's jar: the index's cache key."""
    digest = hashlib.sha256(f"{INDEX_LAYOUT}\n{java.anserini_jar().name}\n".encode())
    try:
        with open(corpus, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except FileNotFoundError:
        raise MissingDataError(f"{corpus}: no such file (give a BEIR corpus.jsonl or a 'docid TAB text' TSV)") from None
    except IsADirectoryError:
        raise FormatError(corpus, None, "is a directory, expected a corpus file") from None
    return digest.hexdigest()


def index_path(corpus: PathLike, cache: PathLike | None = None) -> Path:
    """Where the index of ``corpus`` lives (whether built or not): ``<cache>/indexes/<folder>-<digest>``."""
    root = Path(cache).expanduser() if cache is not None else cache_root()
    name = Path(corpus).resolve().parent.name or "corpus"
    return root / "indexes" / f"{name}-{corpus_digest(corpus)[:16]}"


def build_index(
    corpus: PathLike,
    *,
    threads: int | None = None,
    cache: PathLike | None = None,
    progress: bool = True,
) -> Path:
    """Return the Lucene index of ``corpus`` (BEIR ``corpus.jsonl`` or ``docid TAB text`` TSV, ``.gz`` ok).

    Built on first use into a temporary folder renamed into place when complete, so an interrupted build is
    never reused; later calls with an unchanged corpus file return the cached index at once.
    """
    target = index_path(corpus, cache)
    if target.is_dir():
        log.info("reusing BM25 index %s", target)
        return target
    docs = load_docs(corpus)
    if not docs:
        raise FormatError(corpus, None, "the corpus holds no documents")
    with atomic_folder(target) as building:  # a concurrent build of the same corpus that finished first is kept
        added = _index(docs.items(), len(docs), building, threads or default_threads(), progress)
        if added < len(docs):
            log.warning("%s: %d empty documents were not indexed", corpus, len(docs) - added)
        info = {"corpus": str(Path(corpus).resolve()), "documents": added, "layout": INDEX_LAYOUT,
                "anserini": java.anserini_jar().name}
        (building / "rearank-index.json").write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
    return target


def _index(docs: Iterable[tuple[str, tuple[str, str]]], total: int, folder: Path, threads: int, progress: bool) -> int:
    """Add ``docid -> (title, text)`` pairs to a new Lucene index in ``folder``; return how many were indexed."""
    indexer = java.autoclass("io.anserini.index.SimpleIndexer")(str(folder), False, int(threads))
    added = 0
    try:
        with tqdm(total=total, unit="doc", desc="bm25 index", disable=not progress) as bar:
            for batch in _batched(docs, _INDEX_BATCH):
                raw = [
                    json.dumps({"id": docid, "contents": flat_contents(title, text)}, ensure_ascii=False)
                    for docid, (title, text) in batch
                ]
                added += int(indexer.addRawDocuments(raw))
                bar.update(len(batch))
    finally:
        indexer.close()
    return added


def search(
    index: PathLike,
    queries: Mapping[str, str],
    *,
    k: int = DEFAULT_K,
    k1: float = K1,
    b: float = B,
    threads: int | None = None,
    remove_self: bool = True,
    progress: bool = True,
) -> Run:
    """BM25 top-``k`` of each query: ``qid -> [(docid, score)]`` in rank order, queries in the given order.

    ``remove_self`` drops a hit whose docid equals the qid (retrieving ``k + 1`` so ``k`` remain). Queries
    with no hit (e.g. only stopwords) are left out of the run, with one warning giving their count.
    """
    if k < 1:
        raise RearankError(f"k must be at least 1, got {k}")
    searcher = _open_searcher(index)
    from jnius import JavaException

    # Long queries (e.g. BRIGHT posts) can have more distinct terms than Lucene's default limit of 1024 clauses.
    java.autoclass("org.apache.lucene.search.IndexSearcher").setMaxClauseCount(MAX_QUERY_TERMS)
    array_list = java.autoclass("java.util.ArrayList")
    depth = k + 1 if remove_self else k
    found: dict[str, list[tuple[str, float]]] = {}
    try:
        searcher.set_bm25(float(k1), float(b))
        with tqdm(total=len(queries), unit="query", desc="bm25 search", disable=not progress) as bar:
            for batch in _batched(queries.items(), _SEARCH_BATCH):
                texts, qids = array_list(), array_list()
                for qid, text in batch:
                    qids.add(qid)
                    texts.add(text)
                try:
                    results = searcher.batch_search(texts, qids, depth, int(threads or default_threads()))
                except JavaException as err:
                    first = str(err).splitlines()[0]
                    raise RearankError(f"Lucene failed on a query among {batch[0][0]}..{batch[-1][0]}: {first}") from None
                for entry in results.entrySet().toArray():
                    found[entry.getKey()] = [(hit.docid, float(hit.score)) for hit in entry.getValue()]
                bar.update(len(batch))
    finally:
        searcher.close()
    run: Run = {}
    for qid in queries:
        ranked = [(docid, score) for docid, score in found.get(qid, ()) if not (remove_self and docid == qid)]
        if ranked:
            run[qid] = ranked[:k]
    if len(run) < len(queries):
        log.warning("%d of %d queries retrieved no document (empty or only stopwords)", len(queries) - len(run),
                    len(queries))
    return run


def _open_searcher(index: PathLike):
    """Anserini's SimpleSearcher on ``index``; a clear error if the folder is not a readable Lucene index."""
    searcher_class = java.autoclass("io.anserini.search.SimpleSearcher")
    from jnius import JavaException  # only once the JVM runs: importing jnius starts one

    try:
        return searcher_class(str(index))
    except JavaException as err:
        raise RearankError(f"{index}: not a readable Lucene index ({err}); delete the folder to rebuild it") from None


def bm25_run(
    corpus: PathLike,
    queries: Mapping[str, str],
    *,
    k: int = DEFAULT_K,
    k1: float = K1,
    b: float = B,
    threads: int | None = None,
    remove_self: bool = True,
    cache: PathLike | None = None,
    progress: bool = True,
) -> Run:
    """Index ``corpus`` (or reuse its cached index) and return the BM25 top-``k`` run of ``queries``."""
    if not queries:
        raise RearankError("no queries to search")
    index = build_index(corpus, threads=threads, cache=cache, progress=progress)
    return search(index, queries, k=k, k1=k1, b=b, threads=threads, remove_self=remove_self, progress=progress)


def _batched(items: Iterable[T], size: int) -> Iterator[list[T]]:
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch
