"""The groupwise prompt: a template for :mod:`rearank.prompts` (same fields, same one builder)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rearank.methods.groupwise.parser import format_scores, label_scores
from rearank.prompts import BudgetLike, PromptTemplate, build_messages, load_template
from rearank.prompts.builder import Tokenizer
from rearank.types import Message

#: The builtin groupwise template (usefulness, then relevance; 0-10 scores as JSON in ``<answer>``).
GROUPRANK_TEMPLATE = Path(__file__).resolve().parent / "grouprank.yaml"
#: The layout of GroupRank's released inference: one user message listing ``[i]. text``, 3,000 characters each.
GROUPRANK_RELEASED_TEMPLATE = Path(__file__).resolve().parent / "grouprank-released.yaml"
GROUP_BUILTINS = {"grouprank": GROUPRANK_TEMPLATE, "grouprank-released": GROUPRANK_RELEASED_TEMPLATE}


def load_group_template(template: str | Path | PromptTemplate | None = "grouprank") -> PromptTemplate:
    """Load a builtin groupwise template (``grouprank``, also for None; ``grouprank-released``), or any template
    :func:`load_template` accepts."""
    if template is None:
        template = "grouprank"
    return load_template(GROUP_BUILTINS.get(str(template), template))


def build_group_messages(
    query: str,
    passages: Sequence[str],
    template: str | Path | PromptTemplate | None = "grouprank",
    *,
    budget: BudgetLike = None,
    tokenizer: Tokenizer | None = None,
) -> list[Message]:
    """Chat messages scoring one group of passages (for inference and for groupwise training rows)."""
    return build_messages(query, passages, load_group_template(template), budget=budget, tokenizer=tokenizer)


def sft_target(labels: Sequence[float], max_label: float | None = None) -> Message:
    """The assistant turn of a direct-SFT groupwise row: an empty reason block and the label scores as JSON.

    ``max_label`` maps to score 10 (default: the set's highest label), as :func:`label_scores` does.
    """
    answer = format_scores(label_scores(labels, max_label))
    return {"role": "assistant", "content": f"<reason>\n</reason>\n<answer>{answer}</answer>"}
