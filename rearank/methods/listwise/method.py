"""Listwise reranking (Rearank / RankGPT): windows over the top-k, each answered with a permutation.

Which windows a query is sent in, and how their answers reorder it, is the reorder policy the ``strategy`` names
(:mod:`rearank.methods.listwise.policies`: ``sliding``, the default, or ``tdpart``). The prompt comes from the
template (:mod:`rearank.prompts`), the answer is read by the one parser
(:func:`rearank.methods.listwise.answer.parse_answer`) that the training reward
(:mod:`rearank.methods.listwise.reward`) also uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

from rearank.backends.base import ERROR, LENGTH, Generation, Prompt
from rearank.errors import RearankError
from rearank.grammar import AnswerGrammar, id_list_answer, template_asks
from rearank.methods.base import Task, check_budget, check_positive
from rearank.methods.listwise.answer import ideal_answer, parse_answer
from rearank.methods.listwise.policies import (
    POLICIES,
    SLIDING_STEP,
    TDPART_BUDGET,
    TDPART_PIVOT,
    QueryState,
    ReorderPolicy,
)
from rearank.methods.listwise.tdpart import Window
from rearank.methods.reasoning import reasoning_template
from rearank.prompts import BudgetLike, PromptTemplate, build_messages, render_passages
from rearank.prompts.builder import Tokenizer
from rearank.types import Request, Result, WindowTrace


@dataclass(frozen=True, eq=False)
class Listwise:
    """Windows over the first ``top_k`` candidates (candidates beyond keep their order after them), scheduled by
    the reorder policy ``strategy`` names (:data:`rearank.methods.listwise.policies.POLICIES`): ``sliding``, windows
    of ``window`` passages, ``step`` apart, back to front, ``passes`` times; ``tdpart``, top-down partitioning
    around the passage at rank ``pivot`` of the top window, keeping at most ``budget`` candidates a level
    (:mod:`rearank.methods.listwise.tdpart`). Passages are rendered with
    :func:`rearank.prompts.render_passages`, cut to the template's declared budget or ``passage_budget``
    (``400c``, ``300 words``, ``300 tokens``: tokens of ``tokenizer``, else whitespace words). Settings are
    checked when the method is built, before any model loads. ``reasoning`` (on/off; None: the template's own)
    picks the template's variant with or without reasoning (``rearank`` / ``rearank-answer``); once built it holds
    what the template asks (a bool)."""

    template: str | Path | PromptTemplate = "rearank"
    window: int = 20
    step: int = SLIDING_STEP
    passes: int = 1
    top_k: int = 100
    passage_budget: BudgetLike = None
    tokenizer: Tokenizer | None = None
    reasoning: bool | str | None = None
    strategy: str = "sliding"
    pivot: int = TDPART_PIVOT
    budget: int = TDPART_BUDGET
    name: ClassVar[str] = "listwise"
    #: Command-line flags of the options not shared with other methods (argparse keywords; see rearank.flags).
    FLAGS: ClassVar[dict[str, Any]] = {
        "window": {"help": "passages per window"},
        "step": {"help": "window stride (sliding)"},
        "passes": {"help": "sliding passes over the list"},
        "strategy": {"choices": tuple(POLICIES), "help": "sliding: windows back to front, one after another; tdpart: "
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
        if self.strategy not in POLICIES:
            raise RearankError(f"strategy must be one of {', '.join(POLICIES)}, got {self.strategy!r}")
        self.policy.check()
        check_budget(self.passage_budget)
        object.__setattr__(self, "template", reasoning_template(self.template, self.reasoning))
        object.__setattr__(self, "reasoning", self.template.reasoning)

    @cached_property
    def policy(self) -> ReorderPolicy:
        """The reorder policy ``strategy`` names, for this method."""
        return POLICIES[self.strategy](self)

    def task_count(self, n_candidates: int) -> int | None:
        """Windows of a query with ``n_candidates`` (its traces once finished); None with ``tdpart``, whose
        windows depend on the answers."""
        return self.policy.task_count(n_candidates)

    def start(self, request: Request) -> tuple[QueryState, list[Task]]:
        """First-stage order and passage texts of ``request``; its first ready windows (by the policy)."""
        n = min(len(request.candidates), self.top_k)
        head = request.candidates[:n] if n >= 2 else ()
        texts = render_passages(head, self.template, budget=self.passage_budget, tokenizer=self.tokenizer)
        state = QueryState(request, texts, order=list(range(n)))
        return state, self.policy.start(state)

    def window_prompt(self, state: QueryState, ids: Sequence[int]) -> Prompt:
        """The prompt of a window presenting the passages ``ids`` (positions in the first-stage order)."""
        messages = build_messages(state.request.query.text, [state.texts[i] for i in ids], self.template, clean=False)
        docids = tuple(state.request.candidates[i].docid for i in ids)
        return Prompt(messages=tuple(messages), qid=state.request.query.qid, docids=docids,
                      answer=self.answer_grammar(len(ids)))

    def answer_grammar(self, n: int) -> AnswerGrammar:
        """A window's answer: a permutation of its ``n`` ids, after a ``<think>`` block when the method reasons
        (``reasoning``: the template's, as the switch picked it), in ``<answer>`` tags when the template asks for them
        (the ``rearank`` template), else the bare permutation (``rankgpt``)."""
        template = self.template
        assert isinstance(template, PromptTemplate)
        texts = (template.system, template.prefix_user, template.post)
        return id_list_answer(n, reasoning=bool(self.reasoning), tags=template_asks(texts, "<answer>"))

    def apply(self, state: QueryState, task: Task, generation: Generation) -> list[Task]:
        """Apply ``generation``, the answer to ``task``, by the policy; return the windows this made ready."""
        return self.policy.apply(state, task, generation)

    def trace(self, state: QueryState, generation: Generation, window: Window, pass_index: int,
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
            error=generation.error if status == ERROR else "",
        ))
        return tuple(permutation)

    def result(self, state: QueryState) -> Result:
        cands = state.request.candidates
        head = [cands[i] for i in state.order]
        return Result(state.request.query, head + list(cands[len(state.order):]), state.traces)

    def answer_text(self, labels: Sequence[int], top_grade: int = 1) -> str:
        """The judged order of a window in the template's format, with or without reasoning (:func:`ideal_answer`)."""
        return ideal_answer(labels, reasoning=bool(self.reasoning))
