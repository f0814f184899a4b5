"""Prompt machinery: reading and checking YAML templates (by path; names are resolved by
:mod:`rearank.methods.templates`, built from the method cards) and the one renderer."""

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
    read_template,
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
    "neutralize_ids",
    "passage_text",
    "passage_texts",
    "read_template",
    "render_passages",
    "truncate",
    "truncate_texts",
]
