"""The one prompt builder: a query, its window of passages and a template -> chat messages.

Used by the reranking driver and by data synthesis, so that training and inference prompts match.

Passage text: whitespace is collapsed, bracketed numbers such as ``[3]`` become ``(3)`` so that only
the window's own identifiers appear as ``[n]``, and the passage is cut to ``max_tokens`` tokens of the
model's tokenizer, or to ``max_tokens`` whitespace words when no tokenizer is given (the default budget,
300, follows RankGPT and Rearank).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from rearank.backends.base import Message
from rearank.prompts.templates import PromptTemplate, load_template
from rearank.types import Candidate

#: Default passage budget: tokens of the model's tokenizer, or words without one.
MAX_PASSAGE_TOKENS = 300

_BRACKETED_NUMBER = re.compile(r"\[\s*(\d+)\s*\]")
_SPACES = re.compile(r"\s+")


class Tokenizer(Protocol):
    """What truncation needs from a tokenizer (a Hugging Face tokenizer fits)."""

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...

    def decode(self, ids: list[int], skip_special_tokens: bool = ...) -> str: ...


def neutralize_ids(text: str) -> str:
    """Rewrite bracketed numbers ``[3]`` as ``(3)`` so passage text cannot pose as a passage identifier."""
    return _BRACKETED_NUMBER.sub(r"(\1)", text)


def truncate(text: str, max_tokens: int | None, tokenizer: Tokenizer | None = None) -> str:
    """Cut ``text`` to ``max_tokens`` tokenizer tokens (or whitespace words without a tokenizer); None: no cut."""
    if max_tokens is None:
        return text
    if tokenizer is None:
        words = text.split()
        return text if len(words) <= max_tokens else " ".join(words[:max_tokens])
    ids = tokenizer.encode(text, add_special_tokens=False)
    if len(ids) <= max_tokens:
        return text
    return tokenizer.decode(list(ids[:max_tokens]), skip_special_tokens=True).strip()


def clean_passage(text: str, max_tokens: int | None = None, tokenizer: Tokenizer | None = None) -> str:
    """Collapse whitespace, neutralize bracketed numbers, then truncate."""
    return truncate(neutralize_ids(_SPACES.sub(" ", text).strip()), max_tokens, tokenizer)


def passage_text(
    candidate: Candidate, max_tokens: int | None = MAX_PASSAGE_TOKENS, tokenizer: Tokenizer | None = None
) -> str:
    """Render a candidate for the prompt: ``Title: … Content: …`` when it has a title (BEIR), else its text.

    The result is cleaned and truncated as :func:`clean_passage` does.
    """
    text = f"Title: {candidate.title} Content: {candidate.text}" if candidate.title.strip() else candidate.text
    return clean_passage(text, max_tokens, tokenizer)


def build_messages(
    query: str,
    passages: Sequence[str],
    template: str | Path | PromptTemplate = "rearank",
    *,
    max_passage_tokens: int | None = None,
    tokenizer: Tokenizer | None = None,
) -> list[Message]:
    """Build the chat messages of one listwise window.

    Order: system (if the template has one), the prefix exchange (if any), then for passage ``i``
    (1-based) a user turn ``[i] <passage>`` and an assistant acknowledgement, then the post prompt
    carrying the query and the output format. Passages are cleaned (:func:`clean_passage`); pass
    ``max_passage_tokens`` to truncate them here, or render them with :func:`passage_text` first.
    """
    tpl = load_template(template)
    values: dict[str, Any] = {"query": query, "num": len(passages)}
    messages: list[Message] = []
    if tpl.system:
        messages.append({"role": "system", "content": tpl.system.format(**values)})
    if tpl.prefix_user:
        messages.append({"role": "user", "content": tpl.prefix_user.format(**values)})
        messages.append({"role": "assistant", "content": tpl.prefix_assistant.format(**values)})
    for index, passage in enumerate(passages, start=1):
        text = clean_passage(passage, max_passage_tokens, tokenizer)
        messages.append({"role": "user", "content": tpl.passage_user.format(index=index, passage=text)})
        messages.append({"role": "assistant", "content": tpl.passage_assistant.format(index=index)})
    messages.append({"role": "user", "content": tpl.post.format(**values)})
    return messages
