"""Typed records that flow through the pipeline: files -> requests -> windows -> results."""

from __future__ import annotations

from dataclasses import dataclass, field


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
    """What happened in one window: span, tokens, raw output, parsed permutation, status, latency."""

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


@dataclass(frozen=True)
class Result:
    """A reranked request: candidates in their new order plus the trace of every window."""

    query: Query
    candidates: tuple[Candidate, ...]
    traces: tuple[WindowTrace, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        object.__setattr__(self, "candidates", tuple(self.candidates))
        object.__setattr__(self, "traces", tuple(self.traces))
