"""Ranking prompts: YAML templates (by name from :mod:`rearank.prompts.registry`, or a user's file) and the one
renderer."""

from rearank.prompts.builder import (
    BudgetLike,
    Tokenizer,
    as_budget,
    build_messages,
    candidate_text,
    clean_passage,
    clean_passages,
    neutralize_ids,
    passage_text,
    passage_texts,
    render_passages,
    truncate,
    truncate_texts,
)
from rearank.prompts.templates import (
    BUDGET_UNITS,
    DEFAULT_BUDGET,
    FIELDS,
    PassageBudget,
    PromptTemplate,
    as_reasoning,
    load_template,
    with_reasoning,
)

__all__ = [
    "BUDGET_UNITS",
    "DEFAULT_BUDGET",
    "FIELDS",
    "BudgetLike",
    "PassageBudget",
    "PromptTemplate",
    "Tokenizer",
    "as_budget",
    "as_reasoning",
    "build_messages",
    "candidate_text",
    "clean_passage",
    "clean_passages",
    "load_template",
    "neutralize_ids",
    "passage_text",
    "passage_texts",
    "render_passages",
    "truncate",
    "truncate_texts",
    "with_reasoning",
]
