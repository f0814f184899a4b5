"""What every reranking method gives the engine (:mod:`rearank.engine`): per-query state, prompts, answers applied.

A method never calls a backend; it is a frozen dataclass of its settings, checked when it is built. :meth:`Method.start` turns a request into its state and the tasks that can be
sent now; :meth:`Method.apply` hands one task's generation back and returns the tasks that became ready (the
next window of a sliding schedule; nothing for independent groups, which were all ready at the start). The
engine decides when and how tasks go to the backend (batches, or windows in flight), so a method's result must
not depend on the order in which its ready tasks are answered.

Beside the protocol, the setting checks every method shares (:func:`check_positive`, :func:`check_budget`; the
reasoning switch is :mod:`rearank.methods.reasoning`'s). A method folder imports what it shares from these modules,
never from another method's folder (``tests/unit/test_architecture.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rearank.backends.base import Generation, Prompt
from rearank.errors import RearankError
from rearank.prompts import BudgetLike, as_budget
from rearank.types import Request, Result


@dataclass(frozen=True)
class Task:
    """One prompt of a query: ``index`` numbers it within the query (window or group number: the position of its
    trace in the query's result, where the engine records the prompt's digest), stably across runs."""

    index: int
    prompt: Prompt


class Method(Protocol):
    """A reranking method: listwise windows (:mod:`rearank.methods.listwise`), groups
    (:mod:`rearank.methods.groupwise`), …; a new method is a new module satisfying this."""

    name: str
    #: What passage budgets in tokens count with; None: the engine gives the backend's (methods are frozen
    #: dataclasses, so the engine makes a copy with it).
    tokenizer: Any

    def task_count(self, n_candidates: int) -> int | None:
        """How many tasks (and traces) a query with ``n_candidates`` has in all; None when that depends on the
        answers (listwise ``tdpart``)."""
        ...

    def start(self, request: Request) -> tuple[Any, list[Task]]:
        """The state of ``request`` before any answer, and its tasks that are ready."""
        ...

    def apply(self, state: Any, task: Task, generation: Generation) -> list[Task]:
        """Apply the answer to ``task``; return the tasks this made ready."""
        ...

    def result(self, state: Any) -> Result:
        """The reranked result of a finished query."""
        ...

    def answer_text(self, labels: Sequence[int], top_grade: int) -> str:
        """The ideal answer for a prompt whose passages have these graded ``labels`` (presented order) on a
        scale topping at ``top_grade``: what the oracle backend answers."""
        ...


def check_positive(**values: int) -> None:
    """Raise :class:`RearankError` naming the first setting below its minimum (``window`` 2, the others 1)."""
    for name, value in values.items():
        low = 2 if name in ("window", "group_size") else 1
        if value < low:
            raise RearankError(f"{name} must be at least {low}, got {value}")


def check_budget(passage_budget: BudgetLike) -> None:
    """Raise :class:`RearankError` for a passage budget that does not parse (None: the template's)."""
    try:
        as_budget(passage_budget)
    except ValueError as err:
        raise RearankError(str(err)) from None

