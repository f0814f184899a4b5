"""Frozen records of the RAG layer: a candidate passage and a QA item (question, gold answers, passages)."""

from __future__ import annotations

from dataclasses import dataclass

from rearank.types import Candidate, Query, Request


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
