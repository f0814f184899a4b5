"""Listwise reorder policies: which windows a query's list is sent in, and how their answers reorder it.

A policy is a small class declaring its ``name`` (the listwise ``strategy`` that picks it, through
:data:`POLICIES`) and answering the :class:`ReorderPolicy` interface for one listwise method: it checks the
method's settings, counts a query's windows, starts a query and applies each answer. Prompts and traces are the
method's (:class:`WindowMethod`), the schedules pure functions beside them
(:mod:`.window`, :mod:`.tdpart`). A query's own progress lives in its state's ``plan``.

* :class:`Sliding`: windows back to front, one after another (each reorders what the previous left), so a query
  has one task ready at a time: its next window.
* :class:`TopDownPartitioning` (``tdpart``): a query's windows come in rounds, every window of a round ready at
  once; a round is applied when all its windows are answered, in window order, so the result does not depend on
  the order the answers come in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from rearank.backends.base import Generation, Prompt
from rearank.errors import RearankError
from rearank.methods.base import Task
from rearank.methods.listwise.answer import apply_permutation
from rearank.methods.listwise.tdpart import TopDown, Window
from rearank.methods.listwise.window import schedule, window_count
from rearank.types import Request, WindowTrace

#: The sliding windows' default stride (a ``tdpart`` run takes no other), and ``tdpart``'s default pivot and budget
#: (a sliding run takes no other).
SLIDING_STEP, TDPART_PIVOT, TDPART_BUDGET = 10, 10, 100


@dataclass
class QueryState:
    """A query in progress: current order of its top-k head, its traces, and its reorder policy's ``plan`` (the
    sliding windows left; tdpart's partitioning and the answers of its round in flight)."""

    request: Request
    texts: list[str]
    order: list[int] = field(default_factory=list)
    traces: list[WindowTrace] = field(default_factory=list)
    plan: Any = None


class WindowMethod(Protocol):
    """What a policy reads of its method (:class:`rearank.methods.listwise.Listwise`): the settings, a window's
    prompt, and the trace of its answer (which returns the answer's permutation)."""

    window: int
    step: int
    passes: int
    top_k: int
    pivot: int
    budget: int

    def window_prompt(self, state: QueryState, ids: Sequence[int]) -> Prompt: ...

    def trace(self, state: QueryState, generation: Generation, window: Window, pass_index: int, round_index: int,
              partition: int) -> tuple[int, ...]: ...


class ReorderPolicy:
    """How a :class:`Listwise` method schedules and applies the windows of a query."""

    #: The ``strategy`` value that picks the policy.
    name: ClassVar[str]

    def __init__(self, method: WindowMethod) -> None:
        self.method = method

    def check(self) -> None:
        """Raise :class:`RearankError` for a setting of the method this policy does not take."""

    def task_count(self, n_candidates: int) -> int | None:
        """Windows of a query with ``n_candidates``; None when they depend on the answers."""
        return None

    def start(self, state: QueryState) -> list[Task]:
        """Set the ``plan`` of a new query's ``state``; return its first ready windows."""
        raise NotImplementedError

    def apply(self, state: QueryState, task: Task, generation: Generation) -> list[Task]:
        """Apply ``generation``, the answer to ``task``; return the windows this made ready."""
        raise NotImplementedError


class Sliding(ReorderPolicy):
    """Windows of ``window`` passages, ``step`` apart, back to front, ``passes`` times over the first ``top_k``."""

    name = "sliding"

    def check(self) -> None:
        method = self.method
        if (method.pivot, method.budget) != (TDPART_PIVOT, TDPART_BUDGET):
            raise RearankError(f"pivot ({method.pivot}) and budget ({method.budget}) are for the tdpart strategy; "
                               "the sliding windows follow from window, step and passes")
        if method.step > method.window:
            raise RearankError(f"step ({method.step}) must not exceed window ({method.window}), "
                               "or some passages are never compared")

    def windows(self, n_candidates: int) -> list[tuple[int, int, int]]:
        """The ``(start, end, pass_index)`` windows for a list of ``n_candidates`` (none for fewer than 2)."""
        method = self.method
        n = min(n_candidates, method.top_k)
        if n < 2:
            return []
        one = schedule(n, method.window, method.step)
        return [(start, end, p) for p in range(method.passes) for start, end in one]

    def task_count(self, n_candidates: int) -> int:
        method = self.method
        return window_count(n_candidates, method.window, method.step, method.passes, method.top_k)

    def start(self, state: QueryState) -> list[Task]:
        state.plan = self.windows(len(state.request.candidates))
        return self._next(state)

    def apply(self, state: QueryState, task: Task, generation: Generation) -> list[Task]:
        """Reorder the next window by its answer."""
        start, end, pass_index = state.plan.pop(0)
        window = Window(tuple(state.order[start:end]), start, end)
        permutation = self.method.trace(state, generation, window, pass_index, len(state.traces), 0)
        state.order[start:end] = apply_permutation(state.order[start:end], permutation)
        return self._next(state)

    def _next(self, state: QueryState) -> list[Task]:
        if not state.plan:
            return []
        start, end, _ = state.plan[0]
        return [Task(len(state.traces), self.method.window_prompt(state, state.order[start:end]))]


@dataclass
class Partitioning:
    """A query's top-down partitioning and the answers of its round in flight (by task index)."""

    topdown: TopDown
    answers: dict[int, Generation] = field(default_factory=dict)


class TopDownPartitioning(ReorderPolicy):
    """Top-down partitioning of the first ``top_k`` around the passage at rank ``pivot`` of the top window,
    keeping at most ``budget`` candidates a level (:mod:`rearank.methods.listwise.tdpart`). Each trace names its
    ``round`` and its ``partition`` (window within the round)."""

    name = "tdpart"

    def check(self) -> None:
        method = self.method
        if method.pivot >= method.window:
            raise RearankError(f"pivot ({method.pivot}) must be below window ({method.window}): the pivot is a rank "
                               "of the top window")
        if method.budget < method.pivot:
            raise RearankError(f"budget ({method.budget}) must be at least pivot ({method.pivot}): a level keeps the "
                               "passages above the pivot")
        if method.passes != 1:
            raise RearankError(f"passes ({method.passes}) is for the sliding strategy; tdpart ranks once")
        if method.step != SLIDING_STEP:
            raise RearankError(f"step ({method.step}) is for the sliding strategy; tdpart's windows follow from "
                               "window, pivot and budget")

    def start(self, state: QueryState) -> list[Task]:
        method = self.method
        state.plan = Partitioning(TopDown(list(state.order), method.window, method.pivot, method.budget))
        return self._round(state)

    def apply(self, state: QueryState, task: Task, generation: Generation) -> list[Task]:
        """Keep the answer until its round is answered, then apply the round and return the next one."""
        plan = state.plan
        plan.answers[task.index] = generation
        windows = plan.topdown.windows()
        if len(plan.answers) < len(windows):
            return []
        first = len(state.traces)
        ranked = []
        for partition, window in enumerate(windows):
            answer = plan.answers.pop(first + partition)
            permutation = self.method.trace(state, answer, window, 0, plan.topdown.round, partition)
            ranked.append(apply_permutation(list(window.ids), permutation))
        plan.topdown.advance(ranked)
        state.order = plan.topdown.order()
        return self._round(state)

    def _round(self, state: QueryState) -> list[Task]:
        """The windows of the current round, numbered on from the traces so far."""
        first = len(state.traces)
        return [Task(first + i, self.method.window_prompt(state, window.ids))
                for i, window in enumerate(state.plan.topdown.windows())]


#: The reorder policies by name: the listwise ``strategy`` values.
POLICIES: dict[str, type[ReorderPolicy]] = {policy.name: policy for policy in (Sliding, TopDownPartitioning)}
