"""Groupwise reranking (GroupRank): score groups of documents jointly, average, optionally fuse with the retriever.

Each query's top-k is cut into groups (a balanced partition, or groups sliding by ``group_step``); every
group is one LLM call that answers a 0-10 score per document. A document's score is the mean over the
groups it appears in, over ``shuffles`` orderings of the top-k (the first keeps the retriever order, the
others are random shuffles seeded by ``seed`` and the qid). Groups are independent, so every group of a query
is ready at its start, and a query's result does not depend on the order its groups are answered in. A group
whose answer yields no valid score (no JSON object, or none of its ids) scores its documents by the ``fallback``.
Prompt, parser, oracle answer and reward live beside it in :mod:`rearank.methods.groupwise`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any, ClassVar

from rearank.backends.base import ERROR, Generation, Prompt
from rearank.errors import RearankError
from rearank.methods.base import Task, check_budget, check_positive
from rearank.methods.groupwise.oracle import oracle_answer
from rearank.methods.groupwise.parser import MAX_SCORE, parse_scores, scores_grammar
from rearank.methods.groupwise.presets import PRESETS
from rearank.methods.groupwise.prompt import load_group_template
from rearank.methods.reasoning import reasoning_template
from rearank.prompts import BudgetLike, PromptTemplate, build_messages, render_passages
from rearank.prompts.builder import Tokenizer
from rearank.types import Request, Result, WindowTrace

#: What scores the documents of a group whose answer gives no valid score.
FALLBACKS = ("retriever", "zero")
#: How ``fusion_weight`` fuses: ``minmax`` normalises both scores per query; ``raw`` (GroupRank's released
#: inference) adds ``alpha * score / 10`` and ``(1 - alpha) * retriever score`` as they are.
FUSIONS = ("minmax", "raw")


def partition(n: int, size: int) -> list[tuple[int, int]]:
    """Cut ``range(n)`` into ``ceil(n / size)`` consecutive groups of near-equal size (at most ``size``)."""
    if n <= 0:
        return []
    count = math.ceil(n / size)
    bounds = [i * n // count for i in range(count + 1)]
    return list(pairwise(bounds))


def sliding_groups(n: int, size: int, step: int) -> list[tuple[int, int]]:
    """Groups of ``size`` starting every ``step`` ranks; the last one is moved back to end at ``n``."""
    if n <= size:
        return [(0, n)] if n > 0 else []
    spans = []
    start = 0
    while start + size < n:
        spans.append((start, start + size))
        start += step
    spans.append((n - size, n))
    return spans


def fallback_scores(members: Sequence[int], fallback: str, n: int) -> list[float]:
    """Scores for a group without a valid answer, out of a top-k of ``n``.

    ``retriever``: ``10 * (1 - rank / n)`` from each document's first-stage rank over the whole top-k, so a
    run where every group fails keeps the first-stage order; ``zero``: 0 for every document.
    """
    if fallback == "zero":
        return [0.0] * len(members)
    return [MAX_SCORE * (1 - index / n) for index in members]


def min_max(values: Sequence[float]) -> list[float]:
    """Scale to [0, 1] by the minimum and maximum; all zeros when the values are all equal."""
    low, high = min(values, default=0.0), max(values, default=0.0)
    if high <= low:
        return [0.0] * len(values)
    return [(v - low) / (high - low) for v in values]


def check_group_settings(
    *, group_size: int, group_step: int | None, shuffles: int, fusion_weight: float | None, fallback: str,
    top_k: int, passage_budget: BudgetLike = None, fusion: str = "minmax",
) -> None:
    """Raise :class:`RearankError` for groupwise settings that cannot run (checked before loading a model)."""
    check_positive(group_size=group_size, shuffles=shuffles, top_k=top_k)
    if group_step is not None and not 1 <= group_step <= group_size:
        raise RearankError(f"group_step must be between 1 and group_size ({group_size}), got {group_step}")
    if fusion_weight is not None and not 0.0 <= fusion_weight <= 1.0:
        raise RearankError(f"fusion_weight must be between 0 and 1, got {fusion_weight}")
    if fallback not in FALLBACKS:
        raise RearankError(f"fallback must be one of {', '.join(FALLBACKS)}, got {fallback!r}")
    if fusion not in FUSIONS:
        raise RearankError(f"fusion must be one of {', '.join(FUSIONS)}, got {fusion!r}")
    check_budget(passage_budget)


@dataclass(frozen=True)
class Group:
    """One LLM call: the candidate indices it presents, in presented order, and where it came from."""

    members: tuple[int, ...]
    start: int
    end: int
    shuffle: int


@dataclass
class GroupState:
    """A query in progress: its top-k texts, its groups, and the scores and trace of each answered group."""

    request: Request
    texts: list[str]
    groups: list[Group]
    scores: dict[int, list[float]] = field(default_factory=dict)
    traces: dict[int, WindowTrace] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class Groupwise:
    """Joint 0-10 scores per group of documents (GroupRank style).

    ``group_size`` documents per group; ``group_step=None`` partitions the top-k, a step slides groups
    (documents scored in several groups get the mean). ``shuffles`` > 1 adds random orderings of the top-k
    (a self-ensemble) and averages. ``fusion_weight=alpha`` ranks by ``alpha * rerank + (1 - alpha) *
    retriever`` after min-max normalizing both per query (``fusion="raw"``: ``alpha * score / 10 + (1 - alpha)
    * retriever`` without normalisation); None ranks by the rerank score alone. ``shuffle_all`` shuffles every
    ordering, the first one too (GroupRank's released inference); by default the first keeps the retriever
    order. Passages are cut to the template's budget or ``passage_budget``. Ties keep the retriever order;
    candidates beyond ``top_k`` keep their order after the reranked ones. Result candidates keep their
    retriever scores; the order is the result. One trace per group, in group order (``pass_index`` = shuffle,
    ``permutation`` = the group's members by score). ``reasoning`` (on/off; None: the template's own) picks the
    template's variant with or without the ``<reason>`` part (``grouprank`` / ``grouprank-answer``).
    """

    template: str | Path | PromptTemplate | None = "grouprank"
    group_size: int = 20
    group_step: int | None = None
    shuffles: int = 1
    seed: int = 0
    fusion_weight: float | None = None
    fallback: str = "retriever"
    top_k: int = 100
    passage_budget: BudgetLike = None
    tokenizer: Tokenizer | None = None
    fusion: str = "minmax"
    shuffle_all: bool = False
    reasoning: bool | str | None = None
    name: ClassVar[str] = "groupwise"
    #: ``--preset NAME``: named settings (:mod:`.presets`; attribute names of ``rearank rerank``'s arguments).
    PRESETS: ClassVar[Mapping[str, Mapping[str, Any]]] = PRESETS
    #: Command-line flags of the options not shared with other methods (argparse keywords; see rearank.flags);
    #: None: no flag (``fusion`` and ``shuffle_all`` come with ``--preset grouprank-released``).
    FLAGS: ClassVar[dict[str, Any]] = {
        "group_size": {"help": "documents per group"},
        "group_step": {"type": int, "help": "slide groups by this step (default: partition the top-k)"},
        "shuffles": {"help": "orderings of the top-k to average over"},
        "fusion_weight": {"type": float, "help": "weight of the rerank score fused with the retriever's"},
        "fallback": {"choices": ("retriever", "zero"), "help": "scores of a group whose answer has no valid score"},
        "fusion": None,
        "shuffle_all": None,
    }

    def __post_init__(self) -> None:
        check_group_settings(group_size=self.group_size, group_step=self.group_step, shuffles=self.shuffles,
                             fusion_weight=self.fusion_weight, fallback=self.fallback, top_k=self.top_k,
                             passage_budget=self.passage_budget, fusion=self.fusion)
        object.__setattr__(self, "template", reasoning_template(load_group_template(self.template), self.reasoning))
        object.__setattr__(self, "reasoning", self.template.reasoning)

    def spans(self, n: int) -> list[tuple[int, int]]:
        """The ``(start, end)`` groups over a top-k of ``n`` documents (none for fewer than 2)."""
        if n < 2:
            return []
        if self.group_step is None:
            return partition(n, self.group_size)
        return sliding_groups(n, self.group_size, self.group_step)

    def groups(self, request: Request) -> list[Group]:
        """Every group of one request, shuffle by shuffle; members are 0-based candidate indices."""
        n = min(len(request.candidates), self.top_k)
        spans = self.spans(n)
        groups = []
        for shuffle in range(self.shuffles if spans else 0):
            order = list(range(n))
            if shuffle or self.shuffle_all:
                random.Random(f"{self.seed}/{request.query.qid}/{shuffle}").shuffle(order)
            groups.extend(Group(tuple(order[start:end]), start, end, shuffle) for start, end in spans)
        return groups

    def task_count(self, n_candidates: int) -> int:
        """Groups of a query with ``n_candidates``, over all shuffles (its traces once finished)."""
        return len(self.spans(min(n_candidates, self.top_k))) * self.shuffles

    def start(self, request: Request) -> tuple[GroupState, list[Task]]:
        """The state of ``request`` before any group is scored, and all its groups as tasks."""
        groups = self.groups(request)
        n = min(len(request.candidates), self.top_k) if groups else 0
        texts = render_passages(request.candidates[:n], self.template, budget=self.passage_budget,
                                tokenizer=self.tokenizer)
        state = GroupState(request, texts, groups)
        return state, [Task(i, self.prompt(state, group)) for i, group in enumerate(groups)]

    def prompt(self, state: GroupState, group: Group) -> Prompt:
        """The prompt of one group of ``state``."""
        request = state.request
        messages = build_messages(request.query.text, [state.texts[i] for i in group.members], self.template,
                                  clean=False)
        docids = tuple(request.candidates[i].docid for i in group.members)
        return Prompt(messages=tuple(messages), qid=request.query.qid, docids=docids,
                      answer=scores_grammar(len(group.members), reasoning=bool(self.reasoning)))

    def apply(self, state: GroupState, task: Task, generation: Generation) -> list[Task]:
        """Score the members of the task's group from ``generation`` (or the fallback), add its trace."""
        group = state.groups[task.index]
        size = len(group.members)
        if generation.finish_reason == ERROR:
            status, scores = ERROR, None
        else:
            parsed = parse_scores(generation.text, size, reasoning=bool(self.reasoning))
            status = parsed.status
            scores = parsed.filled() if parsed.json_ok and parsed.n_scored else None
        if scores is None:
            scores = fallback_scores(group.members, self.fallback, len(state.texts))
        state.scores[task.index] = scores
        state.traces[task.index] = WindowTrace(
            qid=state.request.query.qid, start=group.start, end=group.end, pass_index=group.shuffle,
            prompt_tokens=generation.prompt_tokens, completion_tokens=generation.completion_tokens,
            raw_output=generation.text, permutation=tuple(sorted(range(size), key=lambda i: -scores[i])),
            status=status, latency_s=generation.latency_s, think_tokens=generation.think_tokens,
            think_budget_hit=generation.think_budget_hit, error=generation.error if status == ERROR else "",
        )
        return []

    def result(self, state: GroupState) -> Result:
        """The reranked result of a query once all its groups are applied (sums taken in group order)."""
        candidates = state.request.candidates
        n = len(state.texts)
        totals, counts = [0.0] * n, [0] * n
        for index, group in enumerate(state.groups):
            for member, score in zip(group.members, state.scores[index]):
                totals[member] += score
                counts[member] += 1
        scores = [total / count if count else 0.0 for total, count in zip(totals, counts)]
        if self.fusion_weight is not None and n and self.fusion == "raw":
            alpha = self.fusion_weight
            scores = [alpha * s / MAX_SCORE + (1 - alpha) * c.score for s, c in zip(scores, candidates[:n])]
        elif self.fusion_weight is not None and n:
            alpha = self.fusion_weight
            retriever = min_max([c.score for c in candidates[:n]])
            scores = [alpha * r + (1 - alpha) * b for r, b in zip(min_max(scores), retriever)]
        order = sorted(range(n), key=lambda i: (-scores[i], i))
        traces = [state.traces[i] for i in range(len(state.groups))]
        return Result(state.request.query, [candidates[i] for i in order] + list(candidates[n:]), traces)

    def answer_text(self, labels: Sequence[int], top_grade: int = 1) -> str:
        """The groupwise oracle's answer: each document's grade scaled so that ``top_grade`` scores 10."""
        return oracle_answer(labels, top_grade, reasoning=bool(self.reasoning))
