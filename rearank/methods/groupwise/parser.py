"""The one parser of a groupwise answer: ``<reason>…</reason><answer>{"[1]": 7, …}</answer>``.

Used by groupwise inference and by the groupwise reward. It never raises.

Leniency (documented in ``docs/grouprank.md``):

- the answer is the last complete ``<answer>…</answer>`` block, else the text after an unclosed
  ``<answer>``, else the text after the last ``</reason>``, else the whole text;
- the JSON object is the span from the first ``{`` to the last ``}`` of the answer, so code fences or
  prose around it are fine; the object itself must be valid JSON (no repair of quotes or commas);
- keys may be ``"[3]"``, ``"3"`` or ``"[ 3 ]"`` (1-based document ids); a key repeated verbatim keeps its
  last value (JSON semantics), an id spelled twice (``"[3]"`` and ``"3"``) its first;
- values may be integers, floats or numeric strings; floats are kept as they are (7.5 ranks between 7 and
  8); values outside ``[0, 10]`` are clipped and counted as out of range; non-numeric or non-finite values
  are dropped and counted as out of range.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import NamedTuple

from rearank.grammar import AnswerGrammar, Pattern

#: Every status a group output can get, best first.
STATUSES = ("ok", "missing_ids", "out_of_range", "bad_json", "bad_tags")

MIN_SCORE = 0.0
MAX_SCORE = 10.0

_REASON_OPEN = re.compile(r"<reason>", re.IGNORECASE)
_REASON_CLOSE = re.compile(r"</reason>", re.IGNORECASE)
_ANSWER_OPEN = re.compile(r"<answer>", re.IGNORECASE)
_ANSWER_CLOSE = re.compile(r"</answer>", re.IGNORECASE)
_KEY = re.compile(r"\s*\[?\s*(\d{1,9})\s*\]?\s*")


class ParsedScores(NamedTuple):
    """Per-document scores of one group and what was wrong with the raw text.

    ``scores[i]`` is the score of the i-th presented document (0-based), or ``None`` when the answer
    gives it no valid score. ``has_tags``: a ``<reason>…</reason>`` block then an ``<answer>…</answer>``
    block, in that order. ``json_ok``: the answer holds a JSON object (whatever its keys and values).
    Status precedence: bad_tags > bad_json > out_of_range > missing_ids > ok. (A NamedTuple: the reward
    builds one per completion, and a NamedTuple is several times cheaper to build than a frozen dataclass.)
    """

    scores: tuple[float | None, ...]
    status: str
    has_tags: bool
    json_ok: bool
    n_scored: int
    n_missing: int
    n_out_of_range: int

    def filled(self, missing: float = MIN_SCORE) -> list[float]:
        """The scores with ``missing`` for documents that got no valid score."""
        return [missing if s is None else s for s in self.scores]


def has_reason_answer_tags(text: str, reasoning: bool = True) -> bool:
    """Whether ``text`` holds ``<reason>…</reason>`` followed by ``<answer>…</answer>`` (case-insensitive);
    ``reasoning=False``: the answer tags alone."""
    pos = 0
    patterns = (_REASON_OPEN, _REASON_CLOSE, _ANSWER_OPEN, _ANSWER_CLOSE) if reasoning else (_ANSWER_OPEN, _ANSWER_CLOSE)
    for pattern in patterns:
        match = pattern.search(text, pos)
        if match is None:
            return False
        pos = match.end()
    return True


def answer_span(text: str) -> str:
    """The answer part of ``text`` (see the module docstring for the fallbacks)."""
    opens = [m.end() for m in _ANSWER_OPEN.finditer(text)]
    if not opens:
        closes = [m.end() for m in _REASON_CLOSE.finditer(text)]
        return text[closes[-1]:] if closes else text
    closes = [m.start() for m in _ANSWER_CLOSE.finditer(text)]
    if closes:
        before = [end for end in opens if end <= closes[-1]]
        if before:
            return text[before[-1]:closes[-1]]
    return text[opens[-1]:]


def _json_object(span: str) -> dict[str, object] | None:
    """The JSON object in ``span`` (first ``{`` to last ``}``), or None."""
    start = span.find("{")
    end = span.rfind("}")
    if start < 0 or end < start:
        return None
    try:
        value = json.loads(span[start:end + 1])
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


@lru_cache(maxsize=64)
def _bracket_keys(n: int) -> list[str]:
    """``["[1]", …, "[n]"]``: the keys of a well-formed answer, in order."""
    return [f"[{i + 1}]" for i in range(n)]


@lru_cache(maxsize=64)
def _canonical_keys(n: int) -> dict[str, int]:
    """The usual spellings of ids 1..n (``"[3]"``, ``"3"``) mapped to their 0-based index."""
    keys = {key: i for i, key in enumerate(_bracket_keys(n))}
    keys.update({str(i + 1): i for i in range(n)})
    return keys


def _score(value: object) -> tuple[float | None, bool]:
    """``(score clipped to [0, 10] or None, in_range)`` for one JSON value."""
    if isinstance(value, bool):
        return None, False
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None, False
    if isinstance(value, int):
        in_range = MIN_SCORE <= value <= MAX_SCORE
        return float(min(max(value, 0), 10)), in_range
    if isinstance(value, float) and math.isfinite(value):
        return min(max(value, MIN_SCORE), MAX_SCORE), MIN_SCORE <= value <= MAX_SCORE
    return None, False


def _read_pairs(pairs: dict[str, object], n: int) -> tuple[list[float | None], int]:
    """Scores of documents 0..n-1 from the decoded JSON object, and how many entries were out of range."""
    values = list(pairs.values())
    if (
        len(values) == n
        and list(pairs) == _bracket_keys(n)
        and set(map(type, values)) == {int}
        and MIN_SCORE <= min(values) <= max(values) <= MAX_SCORE
    ):  # the well-formed answer, read without a Python loop
        return list(map(float, values)), 0
    scores: list[float | None] = [None] * n
    seen: set[int] = set()
    out_of_range = 0
    canonical = _canonical_keys(n)
    for key, value in pairs.items():
        index = canonical.get(key)
        if index is None:
            match = _KEY.fullmatch(key)
            index = int(match.group(1)) - 1 if match else -1
            if not 0 <= index < n:
                out_of_range += 1
                continue
        if index in seen:
            continue
        seen.add(index)
        scores[index], in_range = _score(value)
        out_of_range += not in_range
    return scores, out_of_range


def parse_scores(text: object, n: int, reasoning: bool = True) -> ParsedScores:
    """Parse a model output for a group of ``n`` documents into per-document scores (never raises);
    ``reasoning=False`` (an answer-only template) asks no ``<reason>`` block of the tags."""
    if not isinstance(text, str):
        text = ""
    try:
        n = max(int(n), 0)  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError):
        n = 0
    has_tags = has_reason_answer_tags(text, reasoning)
    pairs = _json_object(answer_span(text))
    scores, out_of_range = _read_pairs(pairs or {}, n)
    n_scored = n - scores.count(None)
    json_ok = pairs is not None
    if not has_tags:
        status = "bad_tags"
    elif not json_ok:
        status = "bad_json"
    elif out_of_range:
        status = "out_of_range"
    elif n_scored < n:
        status = "missing_ids"
    else:
        status = "ok"
    return ParsedScores(
        scores=tuple(scores),
        status=status,
        has_tags=has_tags,
        json_ok=json_ok,
        n_scored=n_scored,
        n_missing=n - n_scored,
        n_out_of_range=out_of_range,
    )


def label_scores(labels: Sequence[float], max_label: float | None = None) -> list[int]:
    """Graded labels on the 0-10 answer scale: ``round(10 * label / max_label)``, negatives as 0.

    ``max_label`` (default: the highest label, at least 1) maps to 10; the score order is the label order
    whenever there are at most 11 grades.
    """
    top = max_label if max_label is not None else max(max(labels, default=1), 1)
    return [round(MAX_SCORE * min(max(label, 0), top) / top) for label in labels]


def format_scores(scores: Sequence[float]) -> str:
    """Write scores of documents 1..n as the answer JSON ``{"[1]": 7, "[2]": 0}`` (integers when whole)."""
    return json.dumps({f"[{i + 1}]": int(s) if float(s).is_integer() else s for i, s in enumerate(scores)})


def scores_grammar(n: int, reasoning: bool = True) -> AnswerGrammar:
    """What a constrained groupwise answer may be: reasoning in ``<reason>`` (unless ``reasoning=False``), then in
    ``<answer>`` the JSON object of :func:`format_scores` with every id ``[1]..[n]`` once, in order, each an integer
    score from 0 to 10."""
    entries = ", ".join(f'"\\[{i + 1}\\]": (?:10|[0-9])' for i in range(n))
    longest = len(format_scores([10] * n))
    think = ("<reason>", "</reason>") if reasoning else None
    return AnswerGrammar(Pattern("\\{" + entries + "\\}", longest), think, "\n<answer>" if reasoning else "<answer>",
                         "</answer>")
