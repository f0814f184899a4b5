"""The one parser of each BAR-RAG output format, shared by inference (``rag eval``) and the rewards. Never raises.

* Selector: ``<think>…</think><answer> [3], [5], … </answer>``. The ids are the ``[k]`` of the last complete
  ``<answer>`` block, 1-based; ids outside ``1..n_docs`` are dropped; a repeated id marks the selection invalid.
* Generator: ``<think>… Doc [i] …</think><answer>short answer</answer>``. The answer is the last complete
  ``<answer>`` block, stripped; the citations are the distinct ``Doc [i]`` named inside the first ``<think>`` block,
  ``i`` within ``1..n_docs`` when the number of documents shown is known (a cited ``Doc [7]`` of 5 is no citation).
"""

from __future__ import annotations

import re
from typing import NamedTuple

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL | re.IGNORECASE)
_BRACKET_ID = re.compile(r"\[\s*(\d{1,9})\s*\]")
_DOC_CITE = re.compile(r"Doc\s*\[\s*(\d{1,9})\s*\]", re.IGNORECASE)


class Selection(NamedTuple):
    """A parsed selector output: in-range ids (1-based, first occurrence order) and what was wrong.

    ``valid``: an answer block with at least one in-range id and no id repeated -- the reward's gate.
    """

    ids: tuple[int, ...]
    has_answer: bool
    n_repeated: int
    n_out_of_range: int

    @property
    def valid(self) -> bool:
        return self.has_answer and bool(self.ids) and self.n_repeated == 0


class Generation(NamedTuple):
    """A parsed generator output: the answer (None without a complete ``<answer>`` block) and the cited docs."""

    answer: str | None
    cited: frozenset[int]


def parse_selection(text: object, n_docs: int) -> Selection:
    """Parse a selector completion over ``n_docs`` candidates."""
    if not isinstance(text, str):
        return Selection((), False, 0, 0)
    blocks = _ANSWER.findall(text)
    if not blocks:
        return Selection((), False, 0, 0)
    raw = [int(k) for k in _BRACKET_ID.findall(blocks[-1])]
    ids: list[int] = []
    repeated = out_of_range = 0
    for k in raw:
        if not 1 <= k <= n_docs:
            out_of_range += 1
        elif k in ids:
            repeated += 1
        else:
            ids.append(k)
    return Selection(tuple(ids), True, repeated, out_of_range)


def parse_generation(text: object, n_docs: int | None = None) -> Generation:
    """Parse a generator completion: final answer and the distinct ``Doc [i]`` cited while thinking (only
    ``1 <= i <= n_docs`` when ``n_docs``, the number of documents shown, is given)."""
    if not isinstance(text, str):
        return Generation(None, frozenset())
    blocks = _ANSWER.findall(text)
    think = _THINK.search(text)
    cited = frozenset(int(k) for k in _DOC_CITE.findall(think.group(1))) if think else frozenset()
    if n_docs is not None:
        cited = frozenset(i for i in cited if 1 <= i <= n_docs)
    return Generation(blocks[-1].strip() if blocks else None, cited)


def format_selection(ids: list[int] | tuple[int, ...]) -> str:
    """Write 1-based ids in the selector's answer format: ``[3], [5], [1]``."""
    return ", ".join(f"[{i}]" for i in ids)
