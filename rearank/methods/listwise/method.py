"""Listwise reranking (Rearank / RankGPT): windows over the top-k, each answered with a permutation.

Two strategies. ``sliding`` (the default): windows of one query depend on each other (each reorders what the
previous left), so a query has one task ready at a time: its next window. ``tdpart`` (top-down partitioning,
:mod:`rearank.methods.listwise.tdpart`): a query's windows come in rounds, and every window of a round is ready
at once; a round is applied when all its windows are answered, in window order, so the result does not depend on
the order the answers come in. Each trace names its ``round`` and its ``partition`` (window within the round). The
prompt comes from the template (:mod:`rearank.prompts`), the answer is
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
from rearank.methods.listwise.tdpart import TopDown, Window
from rearank.methods.listwise.window import schedule, window_count
from rearank.methods.templates import with_reasoning
from rearank.prompts import (
    BudgetLike,
    PromptTemplate,
    as_budget,
    as_reasoning,
    build_messages,
    render_passages,
)
from rearank.prompts.builder import Tokenizer
from rearank.types import Request, Result, WindowTrace

#: ``strategy`` options: sliding windows back to front, or top-down partitioning.
STRATEGIES = ("sliding", "tdpart")


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
    """A query in progress: current order of its top-k head, its remaining windows, its traces; with ``tdpart``
    its partitioning and the answers of the round in flight (by task index)."""

    request: Request
    texts: list[str]
    windows: list[tuple[int, int, int]]  # (start, end, pass_index)
    order: list[int] = field(default_factory=list)
    traces: list[WindowTrace] = field(default_factory=list)
    topdown: TopDown | None = None
    answers: dict[int, Generation] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class Listwise:
    """Sliding windows of ``window`` passages, ``step`` apart, back to front, ``passes`` times over the first
    ``top_k`` candidates (candidates beyond keep their order after them); or, with ``strategy="tdpart"``, top-down
    partitioning of the first ``top_k`` (the depth) around the passage at rank ``pivot`` of the top window,
    keeping at most ``budget`` candidates a level (:mod:`rearank.methods.listwise.tdpart`). Passages are rendered with
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
    strategy: str = "sliding"
    pivot: int = 10
    budget: int = 100
    name: ClassVar[str] = "listwise"
    #: Command-line flags of the options not shared with other methods (argparse keywords; see rearank.flags).
    FLAGS: ClassVar[dict[str, Any]] = {
        "window": {"help": "passages per window"},
        "step": {"help": "window stride (sliding)"},
        "passes": {"help": "sliding passes over the list"},
        "strategy": {"choices": STRATEGIES, "help": "sliding: windows back to front, one after another; tdpart: "
                     "top-down partitioning (Parry et al. 2024): the top window, then the rest of the top-k compared "
                     "with its pivot in windows sent together, then the passages that beat the pivot -- fewer "
                     "windows and far fewer sequential rounds per query"},
        "pivot": {"help": "tdpart: the rank in the top window whose passage is the pivot (k; below --window)"},
        "budget": {"help": "tdpart: most candidates (passages that beat the pivot) a level keeps to rank further; "
                   "the others stay above the pivot unranked (the paper's 20 cut some relevant passages on DL19)"},
    }

    def __post_init__(self) -> None:
        check_positive(window=self.window, step=self.step, passes=self.passes, top_k=self.top_k, pivot=self.pivot,
                       budget=self.budget)
        if self.strategy not in STRATEGIES:
            raise RearankError(f"strategy must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}")
        if self.strategy == "tdpart" and self.pivot >= self.window:
            raise RearankError(f"pivot ({self.pivot}) must be below window ({self.window}): the pivot is a rank "
                               "of the top window")
        if self.strategy == "tdpart" and self.budget < self.pivot:
            raise RearankError(f"budget ({self.budget}) must be at least pivot ({self.pivot}): a level keeps the "
                               "passages above the pivot")
        if self.strategy == "tdpart" and self.passes != 1:
            raise RearankError(f"passes ({self.passes}) is for the sliding strategy; tdpart ranks once")
        if self.strategy == "sliding" and self.step > self.window:
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

    def task_count(self, n_candidates: int) -> int | None:
        """Windows of a query with ``n_candidates`` (its traces once finished); None with ``tdpart``, whose
        windows depend on the answers."""
        if self.strategy == "tdpart":
            return None
        return window_count(n_candidates, self.window, self.step, self.passes, self.top_k)

    def start(self, request: Request) -> tuple[QueryState, list[Task]]:
        """First-stage order, passage texts and schedule of ``request``; its first window (round)."""
        n = min(len(request.candidates), self.top_k)
        windows = self.windows(len(request.candidates)) if self.strategy == "sliding" else []
        head = request.candidates[:n] if n >= 2 else ()
        texts = render_passages(head, self.template, budget=self.passage_budget, tokenizer=self.tokenizer)
        state = QueryState(request, texts, windows, order=list(range(n)))
        if self.strategy == "tdpart":
            state.topdown = TopDown(list(range(n)), self.window, self.pivot, self.budget)
            return state, self._round(state)
        return state, self._next(state)

    def prompt(self, state: QueryState) -> Prompt:
        """The prompt of the next window of ``state`` (sliding)."""
        start, end, _ = state.windows[0]
        return self._prompt(state, state.order[start:end])

    def _prompt(self, state: QueryState, ids: Sequence[int]) -> Prompt:
        """The prompt of a window presenting the passages ``ids`` (positions in the first-stage order)."""
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

    def _round(self, state: QueryState) -> list[Task]:
        """The windows of the current tdpart round, numbered on from the traces so far."""
        assert state.topdown is not None
        first = len(state.traces)
        return [Task(first + i, self._prompt(state, window.ids)) for i, window in enumerate(state.topdown.windows())]

    def apply(self, state: QueryState, task: Task, generation: Generation) -> list[Task]:
        """Parse ``generation`` as the answer to the next window, reorder the window, add its trace; with tdpart,
        keep it until its round is answered, then apply the round and return the next one."""
        if state.topdown is None:
            start, end, pass_index = state.windows.pop(0)
            window = Window(tuple(state.order[start:end]), start, end)
            permutation = self._trace(state, generation, window, pass_index, len(state.traces), 0)
            state.order[start:end] = apply_permutation(state.order[start:end], permutation)
            return self._next(state)
        topdown = state.topdown
        state.answers[task.index] = generation
        windows = topdown.windows()
        if len(state.answers) < len(windows):
            return []
        first = len(state.traces)
        ranked = []
        for partition, window in enumerate(windows):
            answer = state.answers.pop(first + partition)
            permutation = self._trace(state, answer, window, 0, topdown.round, partition)
            ranked.append(apply_permutation(list(window.ids), permutation))
        topdown.advance(ranked)
        state.order = topdown.order()
        return self._round(state)

    def _trace(self, state: QueryState, generation: Generation, window: Window, pass_index: int,
               round_index: int, partition: int) -> tuple[int, ...]:
        """Parse ``generation`` as the answer to ``window``, add its trace and return its permutation."""
        size = len(window.ids)
        if generation.finish_reason == ERROR:
            permutation, status = tuple(range(size)), ERROR
        else:
            parsed = parse_answer(generation.text, size, hit_token_limit=generation.finish_reason == LENGTH)
            permutation, status = parsed.permutation, parsed.status
        state.traces.append(WindowTrace(
            qid=state.request.query.qid, start=window.start, end=window.end, pass_index=pass_index,
            prompt_tokens=generation.prompt_tokens, completion_tokens=generation.completion_tokens,
            raw_output=generation.text, permutation=tuple(permutation), status=status,
            latency_s=generation.latency_s, think_tokens=generation.think_tokens,
            think_budget_hit=generation.think_budget_hit, round=round_index, partition=partition,
        ))
        return tuple(permutation)

    def result(self, state: QueryState) -> Result:
        cands = state.request.candidates
        head = [cands[i] for i in state.order]
        return Result(state.request.query, head + list(cands[len(state.order):]), state.traces)

    def answer_text(self, labels: Sequence[int], top_grade: int = 1) -> str:
        """The judged order of a window in the template's format, with or without reasoning (:func:`ideal_answer`)."""
        return ideal_answer(labels, reasoning=bool(self.reasoning))
