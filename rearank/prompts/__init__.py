"""Listwise prompts: YAML templates (builtin ``rearank`` and ``rankgpt``, or a user's file) and the one builder."""

from rearank.prompts.builder import (
    MAX_PASSAGE_TOKENS,
    Tokenizer,
    build_messages,
    clean_passage,
    clean_passages,
    neutralize_ids,
    passage_text,
    passage_texts,
    truncate,
    truncate_texts,
)
from rearank.prompts.templates import BUILTINS, FIELDS, PromptTemplate, load_template

__all__ = [
    "BUILTINS",
    "FIELDS",
    "MAX_PASSAGE_TOKENS",
    "PromptTemplate",
    "Tokenizer",
    "build_messages",
    "clean_passage",
    "clean_passages",
    "load_template",
    "neutralize_ids",
    "passage_text",
    "passage_texts",
    "truncate",
    "truncate_texts",
]
