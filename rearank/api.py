"""The one-line Python face: ``from rearank import Reranker``.

    with Reranker("path-or-hub-id", backend="vllm", method="listwise") as rr:
        ranked = rr.rerank("what is a flea's life cycle", ["passage one", "passage two"])
        results = rr.rerank_many([(query, passages), ...], on_result=save)   # batched across queries
        rr.rerank_run("bm25.trec", topics="topics.tsv", docs="docs.tsv", output="out.trec", resume=True)

Passages go in as plain strings, ``(docid, text)`` pairs or :class:`~rearank.types.Candidate`; a plain string's
docid is its position in the list (``"0"``, ``"1"``, …). Every setting is checked when the face is built, before
the backend loads a model. The face builds a method (:data:`rearank.methods.METHODS`) and runs it with the
engine (:class:`rearank.engine.Engine`), so their internals can change without changing it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rearank.backends.base import ERROR, JUDGE, Backend
from rearank.backends.registry import backends
from rearank.data import packs
from rearank.errors import InputError, RearankError
from rearank.io.outputs import check_outputs
from rearank.machine import startup
from rearank.methods import method_options
from rearank.run import job
from rearank.run.config import ENGINE_OPTIONS, RunConfig
from rearank.run.provenance import run_provenance
from rearank.types import Candidate, Query, Request, Result, WindowTrace

#: A passage as the face takes it.
Passage = str | tuple[str, str] | Candidate
#: A query as :meth:`Reranker.rerank_many` takes it: a :class:`Request`, or ``(query text, passages)``.
QueryInput = Request | tuple[str, Sequence[Passage]]
Qrels = Mapping[str, Mapping[str, int]]

def rank_scores(n: int) -> list[float]:
    """Scores of ranks ``0..n-1``: ``(n - rank) / n``, i.e. 1, (n-1)/n, …, 1/n: strictly decreasing, in (0, 1]."""
    return [(n - rank) / n for rank in range(n)]


@dataclass(frozen=True)
class RankedPassage:
    """One passage of a ranking: where it was in the input, its id and text, and its score."""

    index: int
    docid: str
    text: str
    score: float


@dataclass(frozen=True)
class Ranking:
    """A reranked query: passages in their new order with scores from :func:`rank_scores`, and the traces.

    ``failed_windows`` counts windows (or groups) whose generation failed in the backend; their passages kept
    the input order.
    """

    query: Query
    passages: tuple[RankedPassage, ...]
    traces: tuple[WindowTrace, ...] = field(default_factory=tuple)

    @property
    def order(self) -> list[int]:
        """Input positions in the new order."""
        return [p.index for p in self.passages]

    @property
    def docids(self) -> list[str]:
        """Docids in the new order."""
        return [p.docid for p in self.passages]

    @property
    def failed_windows(self) -> int:
        """Windows whose backend call failed (their input order was kept)."""
        return sum(t.status == ERROR for t in self.traces)


def to_candidates(passages: Sequence[Passage]) -> tuple[Candidate, ...]:
    """Candidates from plain strings (docid = position), ``(docid, text)`` pairs or :class:`Candidate`.

    Strings and pairs get the first-stage score ``n - position``, so the input order is the first-stage order.
    """
    if isinstance(passages, (str, bytes)) or not (hasattr(passages, "__len__") and hasattr(passages, "__iter__")):
        got = "one string" if isinstance(passages, (str, bytes)) else type(passages).__name__
        raise InputError(f"passages must be a list of strings, (docid, text) pairs or Candidates, not {got}")
    n = len(passages)
    out = []
    for i, p in enumerate(passages):
        if isinstance(p, Candidate):
            out.append(p)
        elif isinstance(p, str):
            out.append(Candidate(str(i), float(n - i), p))
        elif isinstance(p, tuple) and len(p) == 2 and all(isinstance(x, str) for x in p):
            out.append(Candidate(p[0], float(n - i), p[1]))
        else:
            raise InputError(f"passage {i}: expected a string, a (docid, text) pair or a Candidate, "
                             f"got {type(p).__name__}")
    seen: set[str] = set()
    for c in out:
        if c.docid in seen:
            raise RearankError(f"docid {c.docid!r} appears twice in one query's passages; docids must be unique")
        seen.add(c.docid)
    return tuple(out)


def to_request(item: QueryInput, qid: str) -> Request:
    """A :class:`Request` from a request or a ``(query text, passages)`` pair (which gets ``qid``)."""
    if isinstance(item, Request):
        to_candidates(item.candidates)  # unique docids
        return item
    if isinstance(item, tuple) and len(item) == 2:
        if not isinstance(item[0], str):
            raise InputError(f"query {qid}: the query must be a text (str), got {type(item[0]).__name__}")
        return Request(Query(qid, item[0]), to_candidates(item[1]))
    raise InputError(f"query {qid}: expected a Request or a (query text, passages) pair, got {type(item).__name__}")


def ranking_of(request: Request, result: Result) -> Ranking:
    """The :class:`Ranking` of ``result`` (reranked ``request``): input positions and rank scores."""
    position = {c.docid: i for i, c in enumerate(request.candidates)}
    scores = rank_scores(len(result.candidates))
    passages = tuple(RankedPassage(position[c.docid], c.docid, c.text, s) for c, s in zip(result.candidates, scores))
    return Ranking(result.query, passages, result.traces)


class Reranker:
    """Rerank passages with an LLM reranker: ``Reranker(model, backend=..., method=...)``.

    ``backend``: ``hf`` (default; ``model`` may be ``"embedded"``), ``vllm``, ``openai`` (``model`` = the served
    name, ``base_url=...``) or ``oracle`` (no model; ranks by ``qrels``, a mapping or a qrels file).
    ``method``: a key of :data:`rearank.methods.METHODS` (``listwise`` sliding windows, ``groupwise`` GroupRank
    scoring, ``pointwise`` scores: with ``backend="scorer"``, a saved RRPO scorer or a cross-encoder). Keyword
    options, sorted by :meth:`rearank.run.config.RunConfig.build`: sampling (``max_new_tokens``, ``temperature``,
    ``top_p``, ``seed``), the engine's (``batch_size``, default the backend's: 32, the scorer 256; ``in_flight``),
    the method's own (:func:`rearank.methods.method_options`: listwise ``template window step passes
    top_k passage_budget strategy pivot budget``, ``strategy="tdpart"`` for top-down partitioning; groupwise
    ``template group_size group_step shuffles fusion_weight fallback top_k fusion shuffle_all passage_budget``;
    ``passage_budget`` None keeps the template's; every method's ``reasoning``: True / ``"on"`` reasons before
    answering, False / ``"off"`` answers at once, None does what the template asks); any other keyword goes to the
    backend
    (e.g. ``device="cuda"``, ``tensor_parallel_size=4``, ``base_url=...``). All are checked before a model loads.
    ``progress=True`` shows a progress bar in :meth:`rerank_many` (``rerank_run`` shows one by default).
    """

    def __init__(self, model: str | None = None, *, backend: str = "hf", method: str = "listwise",
                 qrels: Qrels | str | Path | None = None, progress: bool = False, **options: Any) -> None:
        self.progress = progress
        #: The run's typed configuration (:class:`rearank.run.config.RunConfig`), as ``rearank rerank`` builds it.
        self.config = RunConfig.build(method, backend, model, **options)
        #: The qrels file the oracle judges by (an input no ``rerank_run`` output may be), if given as a file.
        self.qrels_file = None if qrels is None or isinstance(qrels, Mapping) else Path(qrels)
        judged = _judgments(self.config, qrels)
        self.method = self.config.ranking_method
        if self.config.declared("MODEL_TOKENIZER"):  # its model loads in this process, on torch's threads
            startup.warn_if_late()
        self.model_name = model or backend
        self.settings = self.config.sampling
        self.engine = self.config.engine(self.config.make_backend(judged))
        #: The backend the engine calls (an oracle answering in the method's format).
        self.backend: Backend = self.engine.backend

    def rerank(self, query: str, passages: Sequence[Passage], *, qid: str = "0") -> Ranking:
        """Rerank one query's passages; ``qid`` names the query (for the oracle's qrels and the traces). A query that
        is no text, or passages that are no list, raise :class:`~rearank.errors.InputError` (a ``ValueError``)."""
        return self.rerank_many([to_request((query, passages), qid)])[0]

    def rerank_many(self, queries: Iterable[QueryInput],
                    on_result: Callable[[Ranking], None] | None = None) -> list[Ranking]:
        """Rerank many queries, batching their windows across queries; rankings come back in input order.

        ``(query text, passages)`` pairs get the qid of their position (``"0"``, ``"1"``, …). ``on_result`` is
        called with each :class:`Ranking` as its query finishes (completion order).
        """
        requests = [to_request(item, str(i)) for i, item in enumerate(queries)]
        job.check_unique_qids(requests)
        by_qid = {r.query.qid: r for r in requests}
        rankings: dict[str, Ranking] = {}

        def emit(result: Result) -> None:
            qid = result.query.qid
            rankings[qid] = ranking_of(by_qid[qid], result)
            if on_result is not None:
                on_result(rankings[qid])

        self.engine.rerank(requests, on_result=emit, progress=self.progress)
        return [rankings[r.query.qid] for r in requests]

    def rerank_run(self, run: str | Path, *, output: str | Path, topics: str | Path | None = None,
                   docs: str | Path | None = None, qrels: Qrels | str | Path | None = None, traces: str | Path | None = None,
                   resume: bool = False, tag: str = "rearank", max_queries: int | None = None,
                   skip_missing: bool = False, progress: bool = True) -> dict[str, Any]:
        """Rerank a TREC run (with ``topics`` and ``docs``) or a RankLLM request JSONL into ``output``.

        The same path as ``rearank rerank``: queries are appended to ``output`` and to the traces file
        (``<output>.traces.jsonl``) as they finish, ``resume=True`` keeps the complete ones, and the statistics go
        to ``<output>.stats.json``; a progress bar shows unless ``progress=False``. Returns the statistics; with
        ``qrels``, also ``ndcg_cut_10`` before and after. No output may be an input (``run``, ``topics``, ``docs``,
        ``qrels``, the oracle's qrels file or a template file): that is refused before anything is read or written.
        """
        output = Path(output)
        traces = Path(traces) if traces is not None else None
        inputs = {"run": run, "topics": topics, "docs": docs, "qrels": None if isinstance(qrels, Mapping) else qrels,
                  "the oracle's qrels": self.qrels_file, "template": self.config.options.get("template")}
        stats_file = job.output_paths(output, traces)[1]
        check_outputs(inputs, {"output": output, "traces": traces, "the stats file": stats_file})
        requests = packs.load_requests(run=run, topics=topics, docs=docs, top_k=job.ALL_CANDIDATES,
                                       skip_missing=skip_missing, max_queries=max_queries)
        job.check_unique_qids(requests)
        stats, extra = job.rerank_to_files(requests, lambda: self.engine, own_ranker=False, output=output,
                                           traces=traces, resume=resume, tag=tag, progress=progress, inputs=inputs,
                                           extra={"provenance": run_provenance(self.config)},
                                           config={**self.config.record(),
                                                   **_run_inputs(run, topics, docs, tag, skip_missing)})
        if qrels is not None:
            judged = qrels if isinstance(qrels, Mapping) else packs.load_qrels(qrels)
            extra["ndcg_cut_10"] = job.ndcg_before_after(requests, judged, output)
            stats.write(stats_file, extra=extra)
        return {**stats.to_dict(), **extra}

    def close(self) -> None:
        """Release the backend (stops vLLM's engine, closes HTTP clients)."""
        self.engine.close()

    def __enter__(self) -> Reranker:  # noqa: PYI034 (Self needs Python 3.11)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _run_inputs(run: str | Path, topics: str | Path | None, docs: str | Path | None, tag: str,
                skip_missing: bool) -> dict[str, Any]:
    """What ``rerank_run`` reads and writes, recorded with the settings as ``rearank rerank`` records its flags, so a
    resume with another input or tag is refused."""
    return {"run": str(run), "topics": topics and str(topics), "docs": docs and str(docs), "tag": tag,
            "skip_missing": skip_missing}


def _judgments(config: RunConfig, qrels: Qrels | str | Path | None) -> Qrels | None:
    """The qrels a backend that ranks by judgments (``NEEDS_QRELS``: the oracle) needs, loaded from a file if given
    as one, after checking the model and the backend's options (its error lists the face's other options)."""
    if config.declared("NEEDS_QRELS"):
        if qrels is None:
            raise RearankError(f"the {config.backend} backend ranks by relevance judgments: pass qrels= "
                               "(a {qid: {docid: grade}} mapping or a qrels file)")
        qrels = qrels if isinstance(qrels, Mapping) else packs.load_qrels(qrels)
    elif qrels is not None:
        judges = backends(JUDGE)
        raise RearankError(f"qrels= is for the {' or '.join(judges)} backend only (backend is {config.backend!r})")
    try:
        config.check_backend()
    except RearankError as err:
        accepted = ", ".join(dict.fromkeys([*method_options(config.method), *ENGINE_OPTIONS, *asdict(config.sampling)]))
        raise RearankError(f"{err}; reranking options are: {accepted}") from None
    return qrels
