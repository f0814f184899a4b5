"""Listwise reranking (Rearank / RankGPT): sliding windows over the top-k, each answered with a permutation.

Windows of one query depend on each other (each reorders what the previous left), so a query has one task
ready at a time: its next window. The prompt comes from the template (:mod:`rearank.prompts`), the answer is
read by the one parser (:func:`rearank.methods.listwise.answer.parse_answer`) that the training reward
(:mod:`rearank.methods.listwise.reward`) also uses, and the schedule is
:func:`rearank.methods.listwise.window.schedule`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from rearank.backends.base import ERROR, LENGTH, Generation, Prompt
from rearank.errors import RearankError
from rearank.grammar import AnswerGrammar, id_list_answer, template_asks
from rearank.methods.base import Task
from rearank.methods.listwise.answer import apply_permutation, ideal_answer, parse_answer
from rearank.methods.listwise.window import schedule, window_count
from rearank.prompts import (
    BudgetLike,
    PromptTemplate,
    as_budget,
    as_reasoning,
    build_messages,
    render_passages,
    with_reasoning,
)
from rearank.prompts.builder import Tokenizer
from rearank.types import Request, Result, WindowTrace


def check_budget(passage_budget: BudgetLike) -> None:
    """Raise :class:`RearankError` for a passage budget that does not parse (None: the template's)."""
    try:
        as_budget(passage_budget)
    except ValueError as err:
        raise RearankError(str(err)) from None


def reasoning_template(template: str | Path | PromptTemplate, reasoning: object) -> PromptTemplate:
    """The template a method uses: ``template``, or its variant with the other reasoning setting when the switch
    ``reasoning`` (on/off, a bool, None: the template's own) asks for it; :class:`RearankError` otherwise."""
    try:
        switch = as_reasoning(reasoning)
    except ValueError as err:
        raise RearankError(str(err)) from None
    return with_reasoning(template, switch)


def check_positive(**values: int) -> None:
    """Raise :class:`RearankError` naming the first setting below its minimum (``window`` 2, the others 1)."""
    for name, value in values.items():
        low = 2 if name in ("window", "group_size") else 1
        if value < low:
            raise RearankError(f"{name} must be at least {low}, got {value}")


@dataclass
class QueryState:
    """A query in progress: current order of its top-k head, its remaining windows, its traces."""

    request: Request
    texts: list[str]
    windows: list[tuple[int, int, int]]  # (start, end, pass_index)
    order: list[int] = field(default_factory=list)
    traces: list[WindowTrace] = field(default_factory=list)


@dataclass(frozen=True, eq=False)
class Listwise:
    """Sliding windows of ``window`` passages, ``step`` apart, back to front, ``passes`` times over the first
    ``top_k`` candidates (candidates beyond keep their order after them). Passages are rendered with
    :func:`rearank.prompts.render_passages`, cut to the template's declared budget or ``passage_budget``
    (``400c``, ``300 words``, ``300 tokens``: tokens of ``tokenizer``, else whitespace words). Settings are
    checked when the method is built, before any model loads. ``reasoning`` (on/off; None: the template's own)
    picks the template's variant with or without reasoning (``rearank`` / ``rearank-answer``); once built it holds
    what the template asks (a bool)."""

    template: str | Path | PromptTemplate = "rearank"
    window: int = 20
    step: int = 10
    passes: int = 1
    top_k: int = 100
    passage_budget: BudgetLike = None
    tokenizer: Tokenizer | None = None
    reasoning: bool | str | None = None
    name: ClassVar[str] = "listwise"
    #: Command-line flags of the options not shared with other methods (argparse keywords; see rearank.flags).
    FLAGS: ClassVar[dict[str, Any]] = {
        "window": {"help": "passages per window"},
        "step": {"help": "window stride"},
        "passes": {"help": "sliding passes over the list"},
    }

    def __post_init__(self) -> None:
        check_positive(window=self.window, step=self.step, passes=self.passes, top_k=self.top_k)
        if self.step > self.window:
            raise RearankError(f"step ({self.step}) must not exceed window ({self.window}), "
                               "or some passages are never compared")
        check_budget(self.passage_budget)
        object.__setattr__(self, "template", reasoning_template(self.template, self.reasoning))
        object.__setattr__(self, "reasoning", self.template.reasoning)

    def windows(self, n_candidates: int) -> list[tuple[int, int, int]]:
        """The ``(start, end, pass_index)`` windows for a list of ``n_candidates`` (none for fewer than 2)."""
        n = min(n_candidates, self.top_k)
        if n < 2:
            return []
        one = schedule(n, self.window, self.step)
        return [(start, end, p) for p in range(self.passes) for start, end in one]

    def task_count(self, n_candidates: int) -> int:
        """Windows of a query with ``n_candidates`` (its traces once finished)."""
        return window_count(n_candidates, self.window, self.step, self.passes, self.top_k)

    def start(self, request: Request) -> tuple[QueryState, list[Task]]:
        """First-stage order, passage texts and schedule of ``request``; its first window."""
        windows = self.windows(len(request.candidates))
        n = min(len(request.candidates), self.top_k)
        head = request.candidates[:n] if windows else ()
        texts = render_passages(head, self.template, budget=self.passage_budget, tokenizer=self.tokenizer)
        state = QueryState(request, texts, windows, order=list(range(n)))
        return state, self._next(state)

    def prompt(self, state: QueryState) -> Prompt:
        """The prompt of the next window of ``state``."""
        start, end, _ = state.windows[0]
        ids = state.order[start:end]
        messages = build_messages(state.request.query.text, [state.texts[i] for i in ids], self.template, clean=False)
        docids = tuple(state.request.candidates[i].docid for i in ids)
        return Prompt(messages=tuple(messages), qid=state.request.query.qid, docids=docids,
                      answer=self.answer_grammar(len(ids)))

    def answer_grammar(self, n: int) -> AnswerGrammar:
        """A window's answer: a permutation of its ``n`` ids, in ``<answer>`` tags after ``<think>`` when the
        template asks for them (the ``rearank`` template), else the bare permutation (``rankgpt``)."""
        template = self.template
        assert isinstance(template, PromptTemplate)
        texts = (template.system, template.prefix_user, template.post)
        return id_list_answer(n, reasoning=template_asks(texts, "<think>"), tags=template_asks(texts, "<answer>"))

    def _next(self, state: QueryState) -> list[Task]:
        return [Task(len(state.traces), self.prompt(state))] if state.windows else []

    def apply(self, state: QueryState, task: Task, generation: Generation) -> list[Task]:
        """Parse ``generation`` as the answer to the next window, reorder the window, add its trace."""
        start, end, pass_index = state.windows.pop(0)
        size = end - start
        if generation.finish_reason == ERROR:
            permutation, status = tuple(range(size)), ERROR
        else:
            parsed = parse_answer(generation.text, size, hit_token_limit=generation.finish_reason == LENGTH)
            permutation, status = parsed.permutation, parsed.status
        state.order[start:end] = apply_permutation(state.order[start:end], permutation)
        state.traces.append(WindowTrace(
            qid=state.request.query.qid, start=start, end=end, pass_index=pass_index,
            prompt_tokens=generation.prompt_tokens, completion_tokens=generation.completion_tokens,
            raw_output=generation.text, permutation=tuple(permutation), status=status,
            latency_s=generation.latency_s, think_tokens=generation.think_tokens,
            think_budget_hit=generation.think_budget_hit,
        ))
        return self._next(state)

    def result(self, state: QueryState) -> Result:
        cands = state.request.candidates
        head = [cands[i] for i in state.order]
        return Result(state.request.query, head + list(cands[len(state.order):]), state.traces)

    def answer_text(self, labels: Sequence[int], top_grade: int = 1) -> str:
        """The judged order of a window in the template's format, with or without reasoning (:func:`ideal_answer`)."""
        return ideal_answer(labels, reasoning=bool(self.reasoning))
