"""The one parser of a model's listwise answer, shared by inference and the RL reward.

A reasoning reranker writes ``<think>...</think><answer>[3] > [1] > [2]</answer>``.
:func:`parse_answer` reads the ``[n]`` ids (1-based in the text, 0-based in the result),
repairs them into a full permutation and classifies the output. It never raises.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from rearank.methods.reasoning import ANSWER_BLOCK, answer_span

#: Every status a window output can get, best first.
STATUSES = ("ok", "missing_ids", "repetition", "out_of_range", "wrong_format", "truncated")

_BRACKET_ID = re.compile(r"\[\s*(\d{1,9})\s*\]")
_BARE_CHAIN = re.compile(r"\d{1,9}(?:\s*>\s*\d{1,9})+")
_STRICT_CHAIN = re.compile(r"\s*\[\d{1,9}\](?:\s*>\s*\[\d{1,9}\])*\s*")

T = TypeVar("T")


@dataclass(frozen=True)
class ParsedAnswer:
    """A repaired permutation of ``range(n)`` and what was wrong with the raw text.

    ``has_tags``: ``<think>…</think>`` then ``<answer>…</answer>`` are present, in that order.
    ``strict_format``: the answer is exactly ``[i] > [j] > …`` with in-range, distinct ids.
    """

    permutation: tuple[int, ...]
    status: str
    has_tags: bool
    strict_format: bool
    n_ids: int
    n_duplicates: int
    n_out_of_range: int
    n_missing: int


def _tags_in_order(text: str) -> bool:
    """``<think>`` … ``</think>`` … ``<answer>`` … ``</answer>``, in that order (case-insensitive)."""
    low = text.lower()
    pos = 0
    for tag in ("<think>", "</think>", "<answer>", "</answer>"):
        pos = low.find(tag, pos)
        if pos < 0:
            return False
        pos += len(tag)
    return True


def parse_answer(text: object, n: int, hit_token_limit: bool = False) -> ParsedAnswer:
    """Parse a model output for a window of ``n`` passages into a full 0-based permutation.

    Ids are read as ``[k]`` (or a bare ``3 > 1 > 2`` chain when no bracket is present);
    out-of-range ids are dropped, duplicates keep their first place, missing ids are
    appended in their presented order. Status precedence: truncated (no closing
    ``</answer>`` after an opening one, or ``hit_token_limit``) > wrong_format (no id) >
    out_of_range > repetition > missing_ids > ok. A ``<think>`` that is never closed (and no
    ``<answer>``) is truncated and keeps the presented order.
    """
    if not isinstance(text, str):
        text = ""
    n = max(int(n), 0)
    span, truncated = answer_span(text)
    raw_ids = [int(m) for m in _BRACKET_ID.findall(span)]
    if not raw_ids:
        chain = _BARE_CHAIN.search(span)
        if chain:
            raw_ids = [int(x) for x in re.findall(r"\d+", chain.group(0))]
    seen: set[int] = set()
    order: list[int] = []
    out_of_range = duplicates = 0
    for k in raw_ids:
        if not 1 <= k <= n:
            out_of_range += 1
        elif k - 1 in seen:
            duplicates += 1
        else:
            seen.add(k - 1)
            order.append(k - 1)
    missing = [i for i in range(n) if i not in seen]
    permutation = tuple(order + missing)

    if truncated or hit_token_limit:
        status = "truncated"
    elif not raw_ids and n > 0:
        status = "wrong_format"
    elif out_of_range:
        status = "out_of_range"
    elif duplicates:
        status = "repetition"
    elif missing:
        status = "missing_ids"
    else:
        status = "ok"

    has_tags = _tags_in_order(text)
    blocks = ANSWER_BLOCK.findall(text)
    strict = bool(
        blocks
        and _STRICT_CHAIN.fullmatch(blocks[-1])
        and raw_ids
        and out_of_range == 0
        and duplicates == 0
    )
    return ParsedAnswer(
        permutation=permutation,
        status=status,
        has_tags=has_tags,
        strict_format=strict,
        n_ids=len(raw_ids),
        n_duplicates=duplicates,
        n_out_of_range=out_of_range,
        n_missing=len(missing),
    )


def apply_permutation(items: Sequence[T], permutation: Sequence[int]) -> list[T]:
    """Reorder ``items`` by a 0-based permutation (``result[i] = items[permutation[i]]``)."""
    if sorted(permutation) != list(range(len(items))):
        raise ValueError(f"not a permutation of range({len(items)}): {list(permutation)[:30]}")
    return [items[i] for i in permutation]


def format_answer(permutation: Sequence[int]) -> str:
    """Write a 0-based permutation in the answer format ``[3] > [1] > [2]``."""
    return " > ".join(f"[{i + 1}]" for i in permutation)


def ideal_permutation(labels: Sequence[float]) -> list[int]:
    """0-based presented positions sorted by label, best first; ties keep their presented order."""
    return sorted(range(len(labels)), key=lambda i: -labels[i])


def ideal_answer(labels: Sequence[int], reasoning: bool = True) -> str:
    """The completion that orders a window by its graded ``labels`` (presented order; ties keep it), in the
    reasoning format (``reasoning=False``: the ``<answer>`` alone): what the oracle backend answers for a
    listwise window."""
    answer = f"<answer>{format_answer(ideal_permutation(labels))}</answer>"
    if not reasoning:
        return answer
    grades = ", ".join(f"[{i + 1}]={label}" for i, label in enumerate(labels))
    return f"<think>Relevance judgments: {grades}.</think>\n{answer}"


def sft_target(labels: Sequence[int], reasoning: bool = True) -> dict[str, str]:
    """The assistant turn of a sampled set's direct-SFT row: an empty think block (none with ``reasoning=False``)
    and the ideal ranking."""
    answer = ideal_answer(labels, reasoning=False)
    return {"role": "assistant", "content": f"<think>\n</think>\n{answer}" if reasoning else answer}
