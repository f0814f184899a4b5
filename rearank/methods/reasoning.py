"""The reasoning of a method, in one place: the switch (on/off) every method reads once
(:func:`reasoning_switch`), the template variant it picks (:func:`reasoning_template`), and the answer part of a
completion that may reason first (:func:`answer_span`).

A value is parsed once, where it enters, by the one parser :func:`rearank.prompts.as_reasoning`: ``--reasoning``
by the command line (:func:`rearank.flags.reasoning_switch`, into a bool), a keyword of the face or ``-O
reasoning=`` here when the method is built. The template the method then holds
(:attr:`rearank.prompts.PromptTemplate.reasoning`: the file's ``reasoning`` field, else whether its messages
mention a reasoning tag) is the one source its prompts, answer grammar, parser and oracle answer read; nothing
derives it again from the template's text.
"""

from __future__ import annotations

import re
from pathlib import Path

from rearank.errors import RearankError
from rearank.methods.templates import with_reasoning
from rearank.prompts import PromptTemplate, as_reasoning

#: A complete ``<answer>`` block (its text is group 1).
ANSWER_BLOCK = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_ANSWER_OPEN = re.compile(r"<answer>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)


def reasoning_switch(reasoning: object) -> bool | None:
    """The reasoning switch of a method (on/off, a bool; None: the template's own) as a bool or None;
    :class:`RearankError` for anything else."""
    try:
        return as_reasoning(reasoning)
    except ValueError as err:
        raise RearankError(str(err)) from None


def reasoning_template(template: str | Path | PromptTemplate, reasoning: object) -> PromptTemplate:
    """The template a method uses: ``template``, or its variant with the other reasoning setting when the switch
    ``reasoning`` asks for it (:func:`reasoning_switch`). Its ``reasoning`` is then what the method does: the one
    source its prompts, answer grammar, parser and oracle read."""
    return with_reasoning(template, reasoning_switch(reasoning))


def answer_span(text: str) -> tuple[str, bool]:
    """Return the answer part of ``text`` and whether it is truncated (``<answer>`` never closed).

    The last complete ``<answer>`` block wins; else the text after an unclosed ``<answer>``;
    else nothing (truncated) when a ``<think>`` is never closed, so ids mentioned while reasoning never
    count as an answer; else the text after the last ``</think>``; else the whole text.
    """
    blocks = ANSWER_BLOCK.findall(text)
    if blocks:
        return blocks[-1], False
    opens = list(_ANSWER_OPEN.finditer(text))
    if opens:
        return text[opens[-1].end():], True
    closes = list(_THINK_CLOSE.finditer(text))
    last_open = max((m.start() for m in _THINK_OPEN.finditer(text)), default=-1)
    if last_open >= 0 and (not closes or closes[-1].start() < last_open):
        return "", True
    if closes:
        return text[closes[-1].end():], False
    return text, False
