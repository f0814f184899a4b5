"""BAR-RAG prompts: the selector's (question + top-25 passages, pick 5) and the generator's (question + evidence).

Passages are listed as ``Doc [i]: (Title: …) content``, 1-based, in the order given. The wording lives in prompt
files (``barrag_selector.yaml``, ``barrag_generator.yaml`` in this folder; :mod:`rearank.methods.templates`):
the structure (``Doc [i]`` with title and content, top-25 candidates, exactly 5 to select, ``<think>``/``<answer>``
tags, the answer rules and an example) is the paper's and the released code's; the wording is ours. Passage text is cleaned as everywhere in rearank (whitespace collapsed, bracketed
numbers rewritten as ``(n)`` so a passage cannot pose as an id).
"""

from __future__ import annotations

from collections.abc import Sequence

from rearank.methods.templates import load_prompt_file
from rearank.prompts.builder import Tokenizer, clean_passages, numbered, titled
from rearank.prompts.qa_files import PromptFile
from rearank.types import Message, Passage

#: Candidates the selector sees, and how many it is asked to select (released training values).
SELECTOR_CANDIDATES = 25
SELECT_K = 5

def render_docs(
    passages: Sequence[Passage], max_passage_tokens: int | None = None, tokenizer: Tokenizer | None = None
) -> str:
    """``Doc [i]: (Title: t) text`` lines, 1-based (no title part when a passage has none)."""
    texts = clean_passages([p.text for p in passages], max_passage_tokens, tokenizer)
    titles = clean_passages([p.title for p in passages])
    docs = [titled(title, text, "(Title: {title}) {text}") for title, text in zip(titles, texts)]
    return "\n".join(numbered(docs, "Doc [{index}]: {passage}"))


def selector_messages(
    question: str, passages: Sequence[Passage], k: int = SELECT_K, *,
    max_passage_tokens: int | None = None, tokenizer: Tokenizer | None = None, template: str | PromptFile = "barrag_selector",
) -> list[Message]:
    """The selector's chat: system turn, then the question and the candidates (callers cut them to 25)."""
    docs = render_docs(passages, max_passage_tokens, tokenizer)
    return load_prompt_file(template).messages(question=" ".join(question.split()), docs=docs, k=k)


def generator_messages(
    question: str, passages: Sequence[Passage], *,
    max_passage_tokens: int | None = None, tokenizer: Tokenizer | None = None, template: str | PromptFile = "barrag_generator",
) -> list[Message]:
    """The generator's (reader's) chat over the evidence passages, numbered ``Doc [1]..``."""
    docs = render_docs(passages, max_passage_tokens, tokenizer)
    return load_prompt_file(template).messages(question=" ".join(question.split()), docs=docs)
