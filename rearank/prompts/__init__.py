"""Listwise prompts: YAML templates (builtin ``rearank`` and ``rankgpt``, or a user's file) and the one builder."""

from rearank.prompts.builder import (
    MAX_PASSAGE_TOKENS,
    build_messages,
    clean_passage,
    neutralize_ids,
    passage_text,
    truncate,
)
from rearank.prompts.templates import BUILTINS, FIELDS, PromptTemplate, load_template

__all__ = [
    "BUILTINS",
    "FIELDS",
    "MAX_PASSAGE_TOKENS",
    "PromptTemplate",
    "build_messages",
    "clean_passage",
    "load_template",
    "neutralize_ids",
    "passage_text",
    "truncate",
]
