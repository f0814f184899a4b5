"""Dataset packs: benchmark names -> folders under ``$REARANK_DATA`` holding topics, qrels, a BM25 run and docs.

Two layouts (the same as the shared packs):

- ``tsv`` (MS MARCO, e.g. ``msmarco-v1-passage/dl19/``): ``topics.tsv``, ``qrels.txt``, ``run.bm25.top100.trec``,
  ``docs.tsv`` (only the passages of the run).
- ``beir`` (BEIR and BRIGHT, e.g. ``beir/scifact/``, ``bright/biology/``): ``corpus.jsonl``, ``queries.jsonl``,
  ``qrels/test.tsv``, plus ``qrels.test.trec`` and a BM25 top-100 run.

Build a missing pack on a connected machine with ``rearank data fetch NAME``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from rearank.errors import MissingDataError, RearankError
from rearank.io import beir, dpr, topics, trec
from rearank.io.docs import read_docs
from rearank.io.files import PathLike
from rearank.io.requests_jsonl import read_requests
from rearank.types import Candidate, Query, Request

log = logging.getLogger("rearank.data.packs")

DEFAULT_ROOT = Path("~/.cache/rearank/data")
TSV_FILES = {"topics": "topics.tsv", "qrels": "qrels.txt", "run": "run.bm25.top100.trec", "docs": "docs.tsv"}
BEIR_FILES = {"topics": "queries.jsonl", "qrels": "qrels.test.trec", "docs": "corpus.jsonl"}


@dataclass(frozen=True)
class PackSpec:
    """A registered benchmark: where its pack lives and where ``rearank data fetch`` gets it."""

    name: str
    folder: str
    layout: str  # "tsv" or "beir"
    ir_datasets_id: str | None  # None: not in ir_datasets; topics/qrels/docs then come from Pyserini
    bm25_index: str  # Pyserini prebuilt Lucene index for the BM25 run
    run_file: str
    pyserini_topics: str | None = None  # Pyserini topics/qrels name, when ir_datasets lacks the dataset
    #: Hugging Face dataset in MTEB's BEIR layout (configs queries, corpus, qrels; split test), when neither
    #: ir_datasets nor Pyserini has the benchmark; its BM25 run then comes from a local index of the corpus
    hf_dataset: str | None = None


def _tsv(name: str, version: int, year: int) -> PackSpec:
    irds = "msmarco-passage" if version == 1 else "msmarco-passage-v2"
    return PackSpec(
        name, f"msmarco-v{version}-passage/{name}", "tsv", f"{irds}/trec-dl-{year}/judged",
        f"msmarco-v{version}-passage", TSV_FILES["run"],
    )


def _beir(name: str, irds: str | None) -> PackSpec:
    return PackSpec(
        f"beir-{name}", f"beir/{name}", "beir", irds, f"beir-v1.0.0-{name}.flat", "run.bm25-flat.top100.trec",
        None if irds else f"beir-v1.0.0-{name}-test",
    )


def _bright(split: str) -> PackSpec:
    return PackSpec(f"bright-{split}", f"bright/{split}", "beir", f"bright/{split}", f"bright-{split}",
                    "run.bm25.top100.trec")


def _r2med(task: str, mteb: str) -> PackSpec:
    return PackSpec(f"r2med-{task}", f"r2med/{task}", "beir", None, "", "run.bm25.top100.trec",
                    hf_dataset=f"mteb/R2MED{mteb}Retrieval")


#: R2MED (Li et al. 2025), GroupRank's medical benchmark: its 8 tasks as MTEB mirrors them on Hugging Face.
R2MED_TASKS = {
    "biology": "Biology", "bioinformatics": "Bioinformatics", "medical-sciences": "MedicalSciences",
    "medxpertqa-exam": "MedXpertQAExam", "medqa-diag": "MedQADiag", "pmc-treatment": "PMCTreatment",
    "pmc-clinical": "PMCClinical", "iiyi-clinical": "IIYiClinical",
}

_SPECS = [
    _tsv("dl19", 1, 2019), _tsv("dl20", 1, 2020), _tsv("dl21", 2, 2021), _tsv("dl22", 2, 2022),
    _tsv("dl23", 2, 2023),
    _beir("trec-covid", "beir/trec-covid"), _beir("nfcorpus", "beir/nfcorpus/test"),
    _beir("dbpedia-entity", "beir/dbpedia-entity/test"), _beir("scifact", "beir/scifact/test"),
    _beir("signal1m", None), _beir("trec-news", None), _beir("robust04", None),
    *(_bright(split) for split in (
        "biology", "earth-science", "economics", "psychology", "robotics", "stackoverflow", "sustainable-living",
        "pony", "leetcode", "aops", "theoremqa-theorems", "theoremqa-questions",
    )),
    *(_r2med(task, mteb) for task, mteb in R2MED_TASKS.items()),
]
REGISTRY: dict[str, PackSpec] = {spec.name: spec for spec in _SPECS}


@dataclass(frozen=True)
class Pack:
    """A pack on disk. ``topics`` is topics.tsv or queries.jsonl; ``docs`` is docs.tsv or corpus.jsonl."""

    name: str
    dir: Path
    layout: str
    topics: Path
    qrels: Path
    run: Path
    docs: Path

    @property
    def corpus(self) -> Path | None:
        """The BEIR ``corpus.jsonl`` (whole collection), or None for a TSV pack (run passages only)."""
        return self.docs if self.layout == "beir" else None


def data_root() -> Path:
    """The packs folder: ``$REARANK_DATA``, else ``~/.cache/rearank/data``."""
    return Path(os.environ.get("REARANK_DATA") or DEFAULT_ROOT).expanduser()


def spec_of(name: str) -> PackSpec:
    """The registered spec of a dataset name; an unknown name lists the known ones."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise RearankError(f"unknown dataset {name!r}; known: {', '.join(REGISTRY)}") from None


def pack_paths(spec: PackSpec, root: PathLike | None = None) -> Pack:
    """The pack's paths under ``root`` (default :func:`data_root`), whether or not they exist."""
    folder = Path(root).expanduser() if root is not None else data_root()
    folder = folder / spec.folder
    files = TSV_FILES if spec.layout == "tsv" else BEIR_FILES
    return Pack(
        name=spec.name, dir=folder, layout=spec.layout, topics=folder / files["topics"],
        qrels=folder / files["qrels"], run=folder / spec.run_file, docs=folder / files["docs"],
    )


def missing_files(pack: Pack) -> list[str]:
    """Names of the pack's files that are absent."""
    return [p.name for p in (pack.topics, pack.qrels, pack.run, pack.docs) if not p.is_file()]


def resolve(name: str, root: PathLike | None = None) -> Pack:
    """Locate a registered pack; raise MissingDataError saying how to get it when it is absent or incomplete."""
    spec = spec_of(name)
    pack = pack_paths(spec, root)
    absent = missing_files(pack)
    if absent:
        state = "is not" if not pack.dir.is_dir() else f"is incomplete (missing {', '.join(absent)})"
        raise MissingDataError(
            f"dataset pack {name!r} {state} at {pack.dir}. Build it on a machine with internet access with "
            f"`rearank data fetch {name}` (it writes under $REARANK_DATA, default {DEFAULT_ROOT}) and copy it "
            f"here, or set REARANK_DATA to a folder that holds {spec.folder}/"
        )
    return pack


def _is_jsonl(path: PathLike) -> bool:
    return str(path).removesuffix(".gz").endswith(".jsonl")


def load_topics(path: PathLike) -> dict[str, str]:
    """Read topics from ``qid TAB text`` TSV or BEIR ``queries.jsonl`` (chosen by the ``.jsonl`` suffix)."""
    return beir.read_queries(path) if _is_jsonl(path) else topics.read_topics(path)


def load_docs(path: PathLike, ids: Collection[str] | None = None) -> dict[str, tuple[str, str]]:
    """Read docs from ``docid TAB text`` TSV, DPR's ``psgs_w100.tsv`` or BEIR ``corpus.jsonl`` into
    ``docid -> (title, text)``."""
    if _is_jsonl(path):
        return beir.read_corpus(path, ids)
    return dpr.read_dpr_passages(path, ids) if dpr.is_dpr_tsv(path) else read_docs(path, ids)


def load_qrels(source: PathLike) -> dict[str, dict[str, int]]:
    """Qrels of a registered dataset name, or of a file: BEIR ``.tsv`` (with header) or TREC qrels.

    Qrels without a single judgment are refused, naming the file.
    """
    if isinstance(source, str) and source in REGISTRY:
        source = resolve(source).qrels
    qrels = beir.read_qrels(source) if str(source).removesuffix(".gz").endswith(".tsv") else trec.read_qrels(source)
    if not any(qrels.values()):
        raise RearankError(f"{source}: the qrels hold no judgments")
    return qrels


def read_request_file(path: PathLike, max_queries: int | None = None) -> list[Request]:
    """The queries of a RankLLM request JSONL file (whatever its name ends with), the first ``max_queries``."""
    return read_requests(path)[:max_queries]


def load_requests(
    *,
    dataset: str | None = None,
    run: PathLike | None = None,
    topics: PathLike | None = None,
    docs: PathLike | None = None,
    top_k: int = 100,
    skip_missing: bool = False,
    max_queries: int | None = None,
) -> list[Request]:
    """Build rerank requests: each query of the run with its top ``top_k`` candidates and their texts.

    ``dataset`` supplies the pack's run, topics and docs; explicit ``run``/``topics``/``docs`` override them.
    ``run`` may be a TREC run or a RankLLM request JSONL (which already holds texts). Queries keep the run's
    order; ``max_queries`` keeps the first ones. A candidate whose docid is not in the docs is an error listing
    the first few (qid, docid), unless ``skip_missing`` (then they are dropped with a warning and a count).
    """
    if top_k < 1:
        raise RearankError(f"top_k must be at least 1, got {top_k}")
    if dataset is not None:
        pack = resolve(dataset)
        run, topics, docs = run or pack.run, topics or pack.topics, docs or pack.docs
    if run is None:
        raise RearankError("no run given: pass a dataset name or a run file")
    if _is_jsonl(run):
        requests = read_requests(run)[:max_queries]
        return [Request(r.query, r.candidates[:top_k]) for r in requests]
    absent = [name for name, value in (("topics", topics), ("docs", docs)) if value is None]
    if absent:
        raise RearankError(f"a TREC run needs {' and '.join(absent)} too (or a dataset name)")

    ranked = list(trec.read_run(run).items())[:max_queries]
    ranked = [(qid, pairs[:top_k]) for qid, pairs in ranked]
    texts = load_topics(topics)
    no_topic = [qid for qid, _ in ranked if qid not in texts]
    if no_topic:
        raise MissingDataError(
            f"{len(no_topic)} queries of {run} have no text in {topics} (first: {', '.join(no_topic[:5])}); "
            "check that the run and the topics belong to the same benchmark"
        )
    wanted = {docid for _, pairs in ranked for docid, _ in pairs}
    doc_texts = load_docs(docs, wanted)
    missing = [(qid, docid) for qid, pairs in ranked for docid, _ in pairs if docid not in doc_texts]
    if missing and not skip_missing:
        first = ", ".join(f"({qid}, {docid})" for qid, docid in missing[:5])
        raise MissingDataError(
            f"{len(missing)} run candidates have no text in {docs}, first (qid, docid): {first}. "
            "Use the docs file that belongs to this run, or skip them (skip_missing=True / --skip-missing)"
        )
    if missing:
        log.warning("%d run candidates without text in %s were dropped", len(missing), docs)
    return [
        Request(
            Query(qid, texts[qid]),
            tuple(
                Candidate(docid, score, doc_texts[docid][1], doc_texts[docid][0])
                for docid, score in pairs
                if docid in doc_texts
            ),
        )
        for qid, pairs in ranked
    ]
