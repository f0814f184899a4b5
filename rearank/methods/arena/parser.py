"""The one parser of ARENA's output, shared by inference and the reward. Never raises.

``<relevance>[1, 5]</relevance><analysis>…</analysis><answer>…</answer>``:

* ``format_ok`` (ARENA §3.3: the ``<relevance>``, ``<analysis>`` and ``<answer>`` parts, in this order): the whole
  output, outer whitespace aside, is the three sections in this order with only whitespace between them, each
  section once; a section may hold any text (``x < y`` included) except one of the six tags;
* ``answer``: the first ``<answer>`` block's content, stripped (None without one) -- read even when the format fails;
* ``relevance``: the first ``<relevance>`` block's content parsed as a JSON list of integers, de-duplicated and
  sorted (None when absent or not such a list).
"""

from __future__ import annotations

import json
import re
from typing import NamedTuple

_STRICT = re.compile(
    r"\s*<relevance>(.*?)</relevance>\s*<analysis>(.*?)</analysis>\s*<answer>(.*?)</answer>\s*", re.DOTALL
)
_SECTION_TAG = re.compile(r"</?(?:relevance|analysis|answer)>")
_RELEVANCE = re.compile(r"<relevance>(.*?)</relevance>", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


class ArenaOutput(NamedTuple):
    format_ok: bool
    relevance: tuple[int, ...] | None
    answer: str | None


def parse_relevance(text: str) -> tuple[int, ...] | None:
    """A JSON list of integers -> sorted distinct ids; anything else -> None."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, list) or not all(type(x) is int for x in value):
        return None
    return tuple(sorted(set(value)))


def parse_arena(text: object) -> ArenaOutput:
    """Parse one ARENA completion."""
    if not isinstance(text, str):
        return ArenaOutput(False, None, None)
    strict = _STRICT.fullmatch(text)
    if strict and not any(_SECTION_TAG.search(part) for part in strict.groups()):
        return ArenaOutput(True, parse_relevance(strict.group(1)), strict.group(3).strip())
    relevance = _RELEVANCE.search(text)
    answer = _ANSWER.search(text)
    return ArenaOutput(False, parse_relevance(relevance.group(1)) if relevance else None,
                       answer.group(1).strip() if answer else None)


def format_arena(relevance: list[int] | tuple[int, ...], analysis: str, answer: str) -> str:
    """Write an output in ARENA's format (a section tag inside the analysis or answer is the caller's problem)."""
    return (f"<relevance>{json.dumps(list(relevance))}</relevance><analysis>{analysis}</analysis>"
            f"<answer>{answer}</answer>")
