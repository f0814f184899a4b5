"""Typed records that flow through the pipeline: files -> requests -> windows -> results, and QA items."""

from __future__ import annotations

from dataclasses import dataclass, field

#: A ranked list per query: ``qid -> [(docid, score), ...]`` in rank order (a TREC run).
Run = dict[str, list[tuple[str, float]]]

#: One chat message: ``{"role": "system"|"user"|"assistant", "content": str}``.
Message = dict


@dataclass(frozen=True)
class Query:
    """A query: its id and its text."""

    qid: str
    text: str


@dataclass(frozen=True)
class Candidate:
    """A first-stage candidate: document id, retriever score, and its text (title optional)."""

    docid: str
    score: float
    text: str = ""
    title: str = ""


@dataclass(frozen=True)
class Request:
    """One query with its ranked candidates (first-stage order)."""

    query: Query
    candidates: tuple[Candidate, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "candidates", tuple(self.candidates))


@dataclass(frozen=True)
class WindowTrace:
    """What happened in one window: span, tokens, raw output, parsed permutation, status, latency; the reasoning's
    tokens and whether the backend closed it at the think budget (``-O max_think_tokens``), when known; the
    query's sequential ``round`` it belongs to (the windows of one round were sent together: a sliding window is
    a round of its own) and its ``partition``, its place in the round (listwise ``tdpart``); a window whose model
    call failed (``status="error"``) says why in ``error``; the digest of the exact
    prompt sent (``prompt_digest``, :meth:`rearank.backends.base.Prompt.digest`; empty in traces of earlier
    versions)."""

    qid: str
    start: int
    end: int
    pass_index: int
    prompt_tokens: int
    completion_tokens: int
    raw_output: str
    permutation: tuple[int, ...]
    status: str
    latency_s: float
    think_tokens: int | None = None
    think_budget_hit: bool = False
    round: int = 0
    partition: int = 0
    error: str = ""
    prompt_digest: str = ""


@dataclass(frozen=True)
class Result:
    """A reranked request: candidates in their new order plus the trace of every window."""

    query: Query
    candidates: tuple[Candidate, ...]
    traces: tuple[WindowTrace, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        object.__setattr__(self, "candidates", tuple(self.candidates))
        object.__setattr__(self, "traces", tuple(self.traces))


@dataclass(frozen=True)
class Passage:
    """A candidate paragraph: id, title, text, and (DPR style) whether it contains a gold answer string."""

    pid: str
    title: str
    text: str
    has_answer: bool | None = None


@dataclass(frozen=True)
class QAItem:
    """A question with its gold answers, its candidate passages (in the given order) and supporting passage ids."""

    qid: str
    question: str
    answers: tuple[str, ...]
    passages: tuple[Passage, ...]
    supporting: frozenset[str] = frozenset()
    source: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "answers", tuple(self.answers))
        object.__setattr__(self, "passages", tuple(self.passages))
        object.__setattr__(self, "supporting", frozenset(self.supporting))

    def to_request(self) -> Request:
        """The item as a rerank request: candidates in the given order, score ``n - position``, title kept."""
        n = len(self.passages)
        return Request(
            Query(self.qid, self.question),
            tuple(Candidate(p.pid, float(n - i), p.text, p.title) for i, p in enumerate(self.passages)),
        )

    def passage(self, pid: str) -> Passage:
        """The passage with id ``pid`` (KeyError if absent)."""
        for p in self.passages:
            if p.pid == pid:
                return p
        raise KeyError(pid)
