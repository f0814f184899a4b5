"""The plain reader's prompt and answer: numbered passages in, the first line of the response out."""

from __future__ import annotations

import re
from collections.abc import Sequence

from rearank.methods.templates import load_prompt_file
from rearank.prompts.builder import numbered
from rearank.prompts.qa_files import PromptFile
from rearank.types import Message, Passage

_ANSWER_PREFIX = re.compile(r"^\s*(?:final\s+)?answer\s*[:\-]\s*", re.IGNORECASE)


def extract_answer(response: str) -> str:
    """The short answer in a response: its first non-empty line, without an ``Answer:`` prefix."""
    for line in response.strip().splitlines():
        line = _ANSWER_PREFIX.sub("", line).strip()
        if line:
            return line
    return ""


def plain_messages(spec: str | PromptFile, question: str, passages: Sequence[Passage]) -> list[Message]:
    """The reader chat of a ``plain`` prompt file over ``passages`` (texts cut already): the passages listed in
    ``{passages}`` as ``[i] (title) text``, or one user turn each when the file has a ``passage`` field (RRPO's
    layout)."""
    spec = load_prompt_file(spec)
    texts = [p.text for p in passages]
    if spec.passage:
        turns = numbered(texts, spec.passage, [p.title for p in passages])
        return spec.messages(tuple({"role": "user", "content": turn} for turn in turns), question=question)
    lines = numbered([f"({p.title}) {t}" if p.title else t for p, t in zip(passages, texts)])  # unlike titled(): "( )"
    return spec.messages(question=question, passages="\n".join(lines))


def plain_oracle(answer: str, supporting: Sequence[int]) -> str:
    """The plain reader's ideal response: the answer alone."""
    return answer
