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


class Tokenizer(Protocol):
    """What truncation needs from a tokenizer (a Hugging Face tokenizer fits): batch encode, decode."""

    def __call__(self, text: list[str], add_special_tokens: bool = ...) -> Any: ...

    def decode(self, token_ids: list[int], skip_special_tokens: bool = ...) -> str: ...


def neutralize_ids(text: str) -> str:
    """Rewrite bracketed numbers ``[3]`` as ``(3)`` so passage text cannot pose as a passage identifier."""
    return _BRACKETED_NUMBER.sub(r"(\1)", text) if "[" in text else text


def truncate_texts(texts: Sequence[str], max_tokens: int | None, tokenizer: Tokenizer | None = None) -> list[str]:
    """Cut each text to ``max_tokens`` tokenizer tokens (whitespace words without a tokenizer); None: no cut.

    Only texts that may exceed the budget are tokenized, in one batch: a token spans at least one UTF-8
    byte (byte-level BPE, WordPiece, SentencePiece with byte fallback), plus at most one leading space marker.
    """
    if max_tokens is None:
        return list(texts)
    if tokenizer is None:
        return [t if len(words := t.split()) <= max_tokens else " ".join(words[:max_tokens]) for t in texts]
    out = list(texts)
    long = [i for i, t in enumerate(texts) if len(t.encode("utf-8")) + 1 > max_tokens]
    if long:
        encoded = tokenizer([texts[i] for i in long], add_special_tokens=False)["input_ids"]
        for i, ids in zip(long, encoded):
            if len(ids) > max_tokens:
                out[i] = tokenizer.decode(list(ids[:max_tokens]), skip_special_tokens=True).strip()
    return out


def truncate(text: str, max_tokens: int | None, tokenizer: Tokenizer | None = None) -> str:
    """One text cut as :func:`truncate_texts` does."""
    return truncate_texts([text], max_tokens, tokenizer)[0]


def clean_passages(
    texts: Sequence[str], max_tokens: int | None = None, tokenizer: Tokenizer | None = None
) -> list[str]:
    """Collapse whitespace, neutralize bracketed numbers (:func:`neutralize_ids`), then truncate."""
    return truncate_texts([neutralize_ids(" ".join(t.split())) for t in texts], max_tokens, tokenizer)


def clean_passage(text: str, max_tokens: int | None = None, tokenizer: Tokenizer | None = None) -> str:
    """One text cleaned as :func:`clean_passages` does."""
    return clean_passages([text], max_tokens, tokenizer)[0]


def passage_texts(
    candidates: Sequence[Candidate], max_tokens: int | None = MAX_PASSAGE_TOKENS, tokenizer: Tokenizer | None = None
) -> list[str]:
    """Render candidates for the prompt: ``Title: … Content: …`` when there is a title (BEIR), else the text.

    The texts are cleaned and truncated as :func:`clean_passages` does.
    """
    rendered = [f"Title: {c.title} Content: {c.text}" if c.title.strip() else c.text for c in candidates]
    return clean_passages(rendered, max_tokens, tokenizer)


def passage_text(
    candidate: Candidate, max_tokens: int | None = MAX_PASSAGE_TOKENS, tokenizer: Tokenizer | None = None
) -> str:
    """One candidate rendered as :func:`passage_texts` does."""
    return passage_texts([candidate], max_tokens, tokenizer)[0]


def build_messages(
    query: str,
    passages: Sequence[str],
    template: str | Path | PromptTemplate = "rearank",
    *,
    max_passage_tokens: int | None = None,
    tokenizer: Tokenizer | None = None,
    clean: bool = True,
) -> list[Message]:
    """Build the chat messages of one listwise window.

    Order: system (if the template has one), the prefix exchange (if any), then for passage ``i``
    (1-based) a user turn ``[i] <passage>`` and an assistant acknowledgement, then the post prompt
    carrying the query and the output format. Passages are cleaned (:func:`clean_passages`) and, with
    ``max_passage_tokens``, truncated; ``clean=False`` skips both for texts that come from
    :func:`passage_texts` already.
    """
    tpl = load_template(template)
    values: dict[str, Any] = {"query": query, "num": len(passages)}
    messages: list[Message] = []
    if tpl.system:
        messages.append({"role": "system", "content": tpl.system.format(**values)})
    if tpl.prefix_user:
        messages.append({"role": "user", "content": tpl.prefix_user.format(**values)})
        messages.append({"role": "assistant", "content": tpl.prefix_assistant.format(**values)})
    texts = clean_passages(passages, max_passage_tokens, tokenizer) if clean else passages
    for index, text in enumerate(texts, start=1):
        messages.append({"role": "user", "content": tpl.passage_user.format(index=index, passage=text)})
        messages.append({"role": "assistant", "content": tpl.passage_assistant.format(index=index)})
    messages.append({"role": "user", "content": tpl.post.format(**values)})
    return messages
