"""The one prompt renderer: a query, its window of passages and a template -> chat messages.

Used by the reranking drivers (listwise and groupwise), data synthesis and ``rearank prompt``, so that
training and inference prompts match byte for byte; the RAG prompts (readers, BAR-RAG, ARENA) list their
passages with the same pieces (:func:`titled`, :func:`clean_passages`, :func:`numbered`).

Passage text (:func:`render_passages`): ``Title: {title} Content: {text}`` when the candidate has a title
(BEIR), else the text; whitespace collapsed; bracketed numbers such as ``[3]`` become ``(3)`` (unless the
template sets ``neutralize_ids: false``) so that only the window's own identifiers appear as ``[n]``; then the
passage is cut to the template's declared :class:`PassageBudget` -- characters or whitespace words (no
tokenizer needed, so every backend cuts alike) or tokens of the model's tokenizer (whitespace words when
there is none).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from rearank.prompts.templates import PassageBudget, PromptTemplate, read_template
from rearank.types import Candidate, Message

_BRACKETED_NUMBER = re.compile(r"\[\s*(\d+)\s*\]")

#: What a caller may pass as a budget: a :class:`PassageBudget`, its text (``400c``), an int (tokens) or None.
BudgetLike = PassageBudget | str | int | None


class Tokenizer(Protocol):
    """What truncation needs from a tokenizer (a Hugging Face tokenizer fits): batch encode, decode."""

    def __call__(self, text: list[str], add_special_tokens: bool = ...) -> Any: ...

    def decode(self, token_ids: list[int], skip_special_tokens: bool = ...) -> str: ...


def as_budget(budget: BudgetLike) -> PassageBudget:
    """A :class:`PassageBudget` from any :data:`BudgetLike` (None: no cut)."""
    return PassageBudget(None) if budget is None else PassageBudget.parse(budget)


def neutralize_ids(text: str) -> str:
    """Rewrite bracketed numbers ``[3]`` as ``(3)`` so passage text cannot pose as a passage identifier."""
    return _BRACKETED_NUMBER.sub(r"(\1)", text) if "[" in text else text


def truncate_texts(texts: Sequence[str], budget: BudgetLike, tokenizer: Tokenizer | None = None) -> list[str]:
    """Cut each text to the budget (an int counts tokens; tokens without a tokenizer count words).

    Characters: the first N characters. Words: the first N whitespace words, joined by single spaces.
    Tokens: only texts that may exceed the budget are tokenized, in one batch -- a token spans at least one
    UTF-8 byte (byte-level BPE, WordPiece, SentencePiece with byte fallback), plus at most one leading space
    marker -- and decoded back from their first N tokens.
    """
    budget = as_budget(budget)
    size = budget.size
    if size is None:
        return list(texts)
    if budget.unit == "characters":
        return [t[:size] for t in texts]
    if budget.unit == "words" or tokenizer is None:
        return [t if len(words := t.split()) <= size else " ".join(words[:size]) for t in texts]
    out = list(texts)
    long = [i for i, t in enumerate(texts) if len(t.encode("utf-8")) + 1 > size]
    if long:
        encoded = tokenizer([texts[i] for i in long], add_special_tokens=False)["input_ids"]
        for i, ids in zip(long, encoded):
            if len(ids) > size:
                out[i] = tokenizer.decode(list(ids[:size]), skip_special_tokens=True).strip()
    return out


def truncate(text: str, budget: BudgetLike, tokenizer: Tokenizer | None = None) -> str:
    """One text cut as :func:`truncate_texts` does."""
    return truncate_texts([text], budget, tokenizer)[0]


def clean_passages(
    texts: Sequence[str], budget: BudgetLike = None, tokenizer: Tokenizer | None = None, *, neutralize: bool = True
) -> list[str]:
    """Collapse whitespace, neutralize bracketed numbers (:func:`neutralize_ids`), then cut to the budget."""
    collapsed = [" ".join(t.split()) for t in texts]
    if neutralize:
        collapsed = [neutralize_ids(t) for t in collapsed]
    return truncate_texts(collapsed, budget, tokenizer)


def clean_passage(text: str, budget: BudgetLike = None, tokenizer: Tokenizer | None = None) -> str:
    """One text cleaned as :func:`clean_passages` does."""
    return clean_passages([text], budget, tokenizer)[0]


def titled(title: str, text: str, form: str = "Title: {title} Content: {text}") -> str:
    """``form`` filled with ``title`` and ``text`` when the title is not blank, else ``text``."""
    return form.format(title=title, text=text) if title.strip() else text


def numbered(texts: Sequence[str], form: str = "[{index}] {passage}", titles: Sequence[str] = (),
             **values: Any) -> list[str]:
    """``form`` filled for each passage: ``{index}`` (1-based), ``{passage}``, ``{title}`` (from ``titles``, if
    given) and ``values``."""
    titles = titles or [""] * len(texts)
    return [form.format(index=i, passage=text, title=title, **values)
            for i, (text, title) in enumerate(zip(texts, titles, strict=True), start=1)]


def candidate_text(candidate: Candidate) -> str:
    """``Title: {title} Content: {text}`` when the candidate has a title (BEIR), else its text, uncut."""
    return titled(candidate.title, candidate.text)


def passage_texts(
    candidates: Sequence[Candidate], budget: BudgetLike = None, tokenizer: Tokenizer | None = None,
    *, neutralize: bool = True,
) -> list[str]:
    """Render candidates (:func:`candidate_text`), cleaned and cut as :func:`clean_passages` does."""
    return clean_passages([candidate_text(c) for c in candidates], budget, tokenizer, neutralize=neutralize)


def passage_text(candidate: Candidate, budget: BudgetLike = None, tokenizer: Tokenizer | None = None) -> str:
    """One candidate rendered as :func:`passage_texts` does."""
    return passage_texts([candidate], budget, tokenizer)[0]


def render_passages(
    candidates: Sequence[Candidate | str],
    template: str | Path | PromptTemplate,
    *,
    budget: BudgetLike = None,
    tokenizer: Tokenizer | None = None,
) -> list[str]:
    """Passage texts as ``template`` shows them: its budget (or ``budget``, an override) and id rule."""
    tpl = read_template(template)
    cut = tpl.passage_budget if budget is None else as_budget(budget)
    raw = [c if isinstance(c, str) else candidate_text(c) for c in candidates]
    return clean_passages(raw, cut, tokenizer, neutralize=tpl.neutralize_ids)


def build_messages(
    query: str,
    passages: Sequence[str | Candidate],
    template: str | Path | PromptTemplate,
    *,
    budget: BudgetLike = None,
    tokenizer: Tokenizer | None = None,
    clean: bool = True,
) -> list[Message]:
    """Build the chat messages of one window.

    Order: system (if the template has one), the prefix exchange (if any), then for passage ``i`` (1-based)
    a user turn and, when the template has one, an assistant acknowledgement (``layout: messages``); then the
    post prompt carrying the query, the output format and, with ``layout: inline``, every passage. With
    ``clean`` the passages go through :func:`render_passages` (the template's budget, or ``budget``);
    ``clean=False`` takes texts that were rendered already. A :class:`Candidate` is rendered with its title
    (:func:`candidate_text`).
    """
    tpl = read_template(template)
    values: dict[str, Any] = {"query": query, "num": len(passages)}
    messages: list[Message] = []
    if tpl.system:
        messages.append({"role": "system", "content": tpl.system.format(**values)})
    if tpl.prefix_user:
        messages.append({"role": "user", "content": tpl.prefix_user.format(**values)})
        messages.append({"role": "assistant", "content": tpl.prefix_assistant.format(**values)})
    texts = render_passages(passages, tpl, budget=budget, tokenizer=tokenizer) if clean else list(passages)
    rendered = numbered(texts, tpl.passage_user, **values)
    if tpl.layout == "inline":
        values["passages"] = tpl.passage_separator.join(rendered)
    else:
        for index, content in enumerate(rendered, start=1):
            messages.append({"role": "user", "content": content})
            if tpl.passage_assistant:
                messages.append({"role": "assistant", "content": tpl.passage_assistant.format(index=index, **values)})
    messages.append({"role": "user", "content": tpl.post.format(**values)})
    return messages
