"""BAR-RAG prompts: the selector's (question + top-25 passages, pick 5) and the generator's (question + evidence).

Passages are listed as ``Doc [i]: (Title: …) content``, 1-based, in the order given. The layout facts (``Doc [i]``
with title and content, top-25 candidates, exactly 5 to select, ``<think>``/``<answer>`` tags) are the released
code's; the wording is ours. Passage text is cleaned as everywhere in rearank (whitespace collapsed, bracketed
numbers rewritten as ``(n)`` so a passage cannot pose as an id).
"""

from __future__ import annotations

from collections.abc import Sequence

from rearank.prompts.builder import Tokenizer, clean_passages
from rearank.rag.types import Passage
from rearank.types import Message

#: Candidates the selector sees, and how many it is asked to select (released training values).
SELECTOR_CANDIDATES = 25
SELECT_K = 5

_SELECTOR_SYSTEM = (
    "You choose evidence for a question-answering model. You get a question and numbered candidate documents. "
    "Pick the {k} documents that together let a reader answer the question: the ones holding the facts it needs, "
    "not ones that merely repeat its words."
)
_SELECTOR_TASK = (
    "Question: {question}\n\n{docs}\n\n"
    "Think about which documents the answer depends on inside <think></think>, then list exactly {k} distinct "
    "document ids inside <answer></answer>, separated by commas, e.g. <answer> [3], [5], [1], [8], [2] </answer>."
)
_GENERATOR_SYSTEM = "You answer questions from the documents you are given, briefly and exactly."
_GENERATOR_TASK = (
    "Question: {question}\n\n{docs}\n\n"
    "Reason inside <think></think>, naming the documents you rely on as Doc [i]; then give only the short final "
    "answer (a name, date, number or short phrase) inside <answer></answer>."
)


def render_docs(
    passages: Sequence[Passage], max_passage_tokens: int | None = None, tokenizer: Tokenizer | None = None
) -> str:
    """``Doc [i]: (Title: t) text`` lines, 1-based (no title part when a passage has none)."""
    texts = clean_passages([p.text for p in passages], max_passage_tokens, tokenizer)
    titles = clean_passages([p.title for p in passages])
    return "\n".join(
        f"Doc [{i}]: (Title: {title}) {text}" if title else f"Doc [{i}]: {text}"
        for i, (title, text) in enumerate(zip(titles, texts), start=1)
    )


def selector_messages(
    question: str, passages: Sequence[Passage], k: int = SELECT_K, *,
    max_passage_tokens: int | None = None, tokenizer: Tokenizer | None = None,
) -> list[Message]:
    """The selector's chat: system turn, then the question and the candidates (callers cut them to 25)."""
    docs = render_docs(passages, max_passage_tokens, tokenizer)
    return [
        {"role": "system", "content": _SELECTOR_SYSTEM.format(k=k)},
        {"role": "user", "content": _SELECTOR_TASK.format(question=" ".join(question.split()), docs=docs, k=k)},
    ]


def generator_messages(
    question: str, passages: Sequence[Passage], *,
    max_passage_tokens: int | None = None, tokenizer: Tokenizer | None = None,
) -> list[Message]:
    """The generator's (reader's) chat over the evidence passages, numbered ``Doc [1]..``."""
    docs = render_docs(passages, max_passage_tokens, tokenizer)
    return [
        {"role": "system", "content": _GENERATOR_SYSTEM},
        {"role": "user", "content": _GENERATOR_TASK.format(question=" ".join(question.split()), docs=docs)},
    ]
