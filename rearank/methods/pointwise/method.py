"""Pointwise reranking: one prompt per passage of the top-k, answered with a relevance score; sorted by it.

Each prompt carries its ``(query, title, text)`` pair (:attr:`rearank.backends.base.Prompt.pair`) for a scorer
backend (:mod:`rearank.backends.scorer`: a cross-encoder or RRPO's policy, answering the score as text), and a
yes/no relevance question (:mod:`rearank.prompts.relevance`) as chat messages for an LLM backend.
:func:`parse_score` reads either answer: a number is the score, a leading ``yes``/``no`` scores 1/0. A passage
whose answer is neither (or failed) goes after the scored ones, in its first-stage order. With ``reasoning`` on,
the question asks the LLM to reason in ``<think>`` first and answer in ``<answer>``; the score is read from the
answer part.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rearank.backends.base import ERROR, Generation, Prompt
from rearank.methods.base import Task, check_positive
from rearank.methods.reasoning import answer_span, reasoning_switch
from rearank.prompts.relevance import relevance_passage, relevance_text
from rearank.types import Request, Result, WindowTrace

#: Trace statuses: a score was read, or the answer (or the backend) gave none.
OK, NO_SCORE = "ok", "no_score"

_NUMBER = re.compile(r"\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$")
_YES_NO = re.compile(r"\W*(yes|no)\b", re.IGNORECASE)


def parse_score(text: str) -> float | None:
    """A generation's score: the number its answer part is (the ``<answer>`` block, else the text after
    ``</think>``, else the whole text: :func:`rearank.methods.reasoning.answer_span`), 1.0 / 0.0 for a leading
    yes / no, else None (also for an unfinished ``<think>``)."""
    text = answer_span(text)[0].strip()
    number = _NUMBER.match(text)
    if number:
        value = float(number.group(1))
        return value if math.isfinite(value) else None
    word = _YES_NO.match(text)
    return None if word is None else float(word.group(1).lower() == "yes")


@dataclass
class PointState:
    """A query in progress: its request and one score slot per top-k passage (None until answered or unreadable)."""

    request: Request
    scores: list[float | None]
    traces: dict[int, WindowTrace] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class Pointwise:
    """Score each of the first ``top_k`` candidates on its own; sort them by score (ties and unscored passages keep
    their first-stage order); the rest follow. Every passage of a query is ready at its start. ``reasoning`` on asks
    an LLM backend to reason before its yes/no (default off; a scorer backend reads the pair, not the question)."""

    top_k: int = 100
    tokenizer: Any = None
    reasoning: bool | str | None = None
    name: ClassVar[str] = "pointwise"
    #: The backend of a run that names none: the scorer (a saved RRPO scorer, a cross-encoder or a causal LM).
    DEFAULT_BACKEND: ClassVar[str] = "scorer"

    def __post_init__(self) -> None:
        check_positive(top_k=self.top_k)
        object.__setattr__(self, "reasoning", bool(reasoning_switch(self.reasoning)))

    def task_count(self, n_candidates: int) -> int:
        """One task per top-k passage (none for fewer than 2 candidates: nothing to sort)."""
        n = min(n_candidates, self.top_k)
        return n if n >= 2 else 0

    def start(self, request: Request) -> tuple[PointState, list[Task]]:
        n = self.task_count(len(request.candidates))
        query = request.query.text
        tasks = []
        for i, cand in enumerate(request.candidates[:n]):
            message = {"role": "user", "content": relevance_text(query, relevance_passage(cand.title, cand.text),
                                                                 bool(self.reasoning))}
            tasks.append(Task(i, Prompt(messages=(message,), qid=request.query.qid, docids=(cand.docid,),
                                        pair=(query, cand.title, cand.text))))
        return PointState(request, [None] * n), tasks

    def apply(self, state: PointState, task: Task, generation: Generation) -> list[Task]:
        """Read the score of passage ``task.index``; nothing becomes ready (passages are independent)."""
        failed = generation.finish_reason == ERROR
        score = None if failed else parse_score(generation.text)
        state.scores[task.index] = score
        state.traces[task.index] = WindowTrace(
            qid=state.request.query.qid, start=task.index, end=task.index + 1, pass_index=0,
            prompt_tokens=generation.prompt_tokens, completion_tokens=generation.completion_tokens,
            raw_output=generation.text, permutation=(0,), latency_s=generation.latency_s,
            status=ERROR if failed else OK if score is not None else NO_SCORE, error=generation.error if failed else "")
        return []

    def result(self, state: PointState) -> Result:
        scored = [i for i, s in enumerate(state.scores) if s is not None]
        scored.sort(key=lambda i: -state.scores[i])  # type: ignore[operator]
        head = scored + [i for i, s in enumerate(state.scores) if s is None]
        cands = state.request.candidates
        order = [cands[i] for i in head] + list(cands[len(state.scores):])
        return Result(state.request.query, tuple(order), tuple(state.traces[i] for i in sorted(state.traces)))

    def answer_text(self, labels: Sequence[int], top_grade: int = 1) -> str:
        """The judged grade of the prompt's one passage, as its score (after a reasoning block with reasoning on)."""
        if self.reasoning:
            return f"<think>The judged grade is {labels[0]}.</think>\n<answer>{labels[0]}</answer>"
        return str(labels[0])
