"""What a method's answer may look like, declared by the method for each prompt (constrained decoding, think budget).

An :class:`AnswerGrammar` says where the answer starts (after the reasoning's closing tag, or at once), the text
that opens it, its body and the text that closes it. A body is either :class:`IdList` (distinct ``[k]`` ids: the
listwise permutation, the BAR-RAG selection) or :class:`Pattern` (a regular expression: groupwise JSON scores,
ARENA's tags). Backends turn a grammar into a token filter (:mod:`rearank.backends.constrain`) or a server's
structured-output request (:meth:`AnswerGrammar.regex`); the method's parser stays the one reader of the text,
and an answer the grammar allows parses cleanly with it (``tests/unit/test_constrain.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

#: Every ``-O constrain=`` value: ``off`` (the model writes freely) and ``answer`` (the answer part is constrained).
CONSTRAIN_MODES = ("off", "answer")


@dataclass(frozen=True)
class IdList:
    """``count`` distinct ids ``[k]`` with ``1 <= k <= n``, joined by ``separator`` (a permutation when count == n)."""

    n: int
    count: int
    separator: str = " > "

    def __post_init__(self) -> None:
        if not 1 <= self.count <= self.n:
            raise ValueError(f"IdList: count must be between 1 and n ({self.n}), got {self.count}")

    def max_chars(self) -> int:
        """The longest text this body allows."""
        widths = sorted((len(str(k)) + 2 for k in range(1, self.n + 1)), reverse=True)
        return sum(widths[:self.count]) + len(self.separator) * (self.count - 1)

    def regex(self) -> str:
        """A regular expression for the same text without the distinctness rule (no regular expression of
        reasonable size says "each id once" for 20 ids): what a server's structured output can enforce."""
        item = r"\[(?:" + _number_range(self.n) + r")\]"
        sep = re.escape(self.separator)
        return item + (f"(?:{sep}{item}){{{self.count - 1}}}" if self.count > 1 else "")


@dataclass(frozen=True)
class Pattern:
    """Text matching ``regex`` (the dialect of ``interegular``: no look-arounds, no back-references);
    ``max_chars`` bounds its length (None: unbounded)."""

    regex_text: str
    max_chars_bound: int | None = None

    def max_chars(self) -> int | None:
        return self.max_chars_bound

    def regex(self) -> str:
        return self.regex_text


@dataclass(frozen=True)
class AnswerGrammar:
    """The answer part of a method's output.

    ``think``: the opening and closing tags of the reasoning that comes first (``("<think>", "</think>")``), or
    None when the model answers at once. ``opening`` is written after the reasoning closes (``"\\n<answer>"``),
    then the body, then ``closing`` (``"</answer>"``); nothing may follow.
    """

    body: IdList | Pattern
    think: tuple[str, str] | None = None
    opening: str = ""
    closing: str = ""

    def answer_regex(self) -> str:
        """The answer part (from the opening on) as a regular expression; leading whitespace of the opening may
        vary."""
        lead = self.opening.lstrip()
        space = r"\s*" if lead != self.opening or self.think else ""
        return space + re.escape(lead) + self.body.regex() + re.escape(self.closing)

    def regex(self, think_chars: int | None = None) -> str:
        """The whole output as a regular expression (a server's structured output): reasoning text without ``<``
        (at most ``think_chars`` characters when given), then the answer part."""
        if self.think is None:
            return self.answer_regex()
        bound = "*" if think_chars is None else f"{{0,{think_chars}}}"
        return re.escape(self.think[0]) + f"[^<]{bound}" + re.escape(self.think[1]) + self.answer_regex()

    def max_answer_chars(self) -> int | None:
        """The longest answer part (closing tag of the reasoning, opening, body, closing), or None (unbounded)."""
        body = self.body.max_chars()
        if body is None:
            return None
        close = len(self.think[1]) if self.think else 0
        return close + len(self.opening) + body + len(self.closing)

    def to_dict(self) -> dict[str, Any]:
        """A plain, JSON-ready form (sent to vLLM's engine process with each request)."""
        body: dict[str, Any]
        if isinstance(self.body, IdList):
            body = {"ids": [self.body.n, self.body.count, self.body.separator]}
        else:
            body = {"regex": [self.body.regex_text, self.body.max_chars_bound]}
        return {"body": body, "think": list(self.think) if self.think else None, "opening": self.opening,
                "closing": self.closing}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AnswerGrammar:
        """The inverse of :meth:`to_dict`."""
        spec = data["body"]
        body = IdList(*spec["ids"]) if "ids" in spec else Pattern(*spec["regex"])
        think = tuple(data["think"]) if data.get("think") else None
        return cls(body, think, data.get("opening", ""), data.get("closing", ""))  # type: ignore[arg-type]


def _number_range(n: int) -> str:
    """A regular expression of the decimal numbers 1..n, no leading zeros (alternation, longest first)."""
    return "|".join(str(k) for k in range(n, 0, -1))


def id_list_answer(n: int, *, reasoning: bool, tags: bool, count: int | None = None,
                   separator: str = " > ", think: tuple[str, str] = ("<think>", "</think>")) -> AnswerGrammar:
    """``[k]`` ids in ``<answer>`` tags after a reasoning block (``reasoning``), or bare ids answered at once."""
    body = IdList(n, n if count is None else count, separator)
    if not tags:
        return AnswerGrammar(body, think if reasoning else None)
    return AnswerGrammar(body, think if reasoning else None, "\n<answer>" if reasoning else "<answer>", "</answer>")


def template_asks(texts: tuple[str, ...], tag: str) -> bool:
    """Whether a prompt's texts ask for ``tag`` (e.g. ``<think>``): how a method tells a reasoning template from
    an answer-only one."""
    return any(tag in text.lower() for text in texts)
