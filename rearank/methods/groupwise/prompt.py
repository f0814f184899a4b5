"""The groupwise prompt: a template for :mod:`rearank.prompts` (same fields, same one builder)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rearank.methods.groupwise.parser import format_scores, label_scores
from rearank.methods.templates import load_template
from rearank.prompts import BudgetLike, PromptTemplate, build_messages
from rearank.prompts.builder import Tokenizer
from rearank.types import Message

#: The builtin groupwise template (usefulness, then relevance; 0-10 scores as JSON in ``<answer>``).
GROUPRANK_TEMPLATE = Path(__file__).resolve().parent / "grouprank.yaml"


def load_group_template(template: str | Path | PromptTemplate | None = "grouprank") -> PromptTemplate:
    """Load a ranking template as :func:`rearank.methods.templates.load_template` does; None is ``grouprank`` (``grouprank-released``: the
    layout of GroupRank's released inference, one user message listing ``[i]. text``, 3,000 characters each)."""
    return load_template("grouprank" if template is None else template)


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


def sft_target(labels: Sequence[float], max_label: float | None = None, reasoning: bool = True) -> Message:
    """The assistant turn of a direct-SFT groupwise row: an empty reason block (none with ``reasoning=False``) and
    the label scores as JSON.

    ``max_label`` maps to score 10 (default: the set's highest label), as :func:`label_scores` does.
    """
    answer = f"<answer>{format_scores(label_scores(labels, max_label))}</answer>"
    return {"role": "assistant", "content": f"<reason>\n</reason>\n{answer}" if reasoning else answer}
