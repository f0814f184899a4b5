"""The ARENA reward in verl's custom-reward signature: format + accuracy + relevance + bonus.

``reward.custom_reward_function.path=pkg://rearank.methods.arena.reward``, ``name=compute_score``.

* format 1 when the output is exactly ``<relevance>…</relevance><analysis>…</analysis><answer>…</answer>``
  (see :mod:`rearank.methods.arena.parser`), else 0;
* accuracy 1 when the answer equals a gold answer under ARENA's normalisation (App. C.1: ``_`` becomes a space,
  other punctuation removed, lower case, articles dropped, whitespace collapsed), else 0;
* relevance 1 when the de-duplicated sorted ids of the JSON list in ``<relevance>`` equal the gold supporting ids,
  0.5 when they share any id, else 0 (not a JSON list of integers: 0);
* bonus 10 when the other three are all 1.

Totals lie in {0, 0.5, 1, ..., 3, 13}. Ground truth: ``{"answers": [...], "supporting": [1-based ids]}`` (what
``rearank synth --method arena`` writes), decoded once per distinct string. Malformed ground truth scores 0 with
``parse_status`` 1. :func:`compute_score` never raises for any completion or ground truth; an invalid option
raises ValueError.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from rearank.measures.answers import Style, normalize_answer
from rearank.methods.arena.parser import parse_arena
from rearank.qa.truth import truth_parser

#: ARENA's answer normalisation (App. C.1): SQuAD's, each ``_`` read as a space first.
STYLE = Style("arena", spaces="_")
PARSE_STATUSES = ("ok", "bad_ground_truth")
PARTS = ("score", "format", "accuracy", "relevance", "bonus", "parse_status")


class _Truth(NamedTuple):
    normalized: frozenset[str]
    supporting: tuple[int, ...]


def relevance_score(predicted: tuple[int, ...] | None, gold: tuple[int, ...]) -> float:
    """1 for the exact gold id set, 0.5 for any overlap, else 0 (None -- not a JSON list -- is 0)."""
    if predicted is None:
        return 0.0
    if predicted == gold:
        return 1.0
    return 0.5 if set(predicted) & set(gold) else 0.0


def _truth(value: Any) -> _Truth | None:
    if not isinstance(value, dict):
        return None
    answers, supporting = value.get("answers"), value.get("supporting", [])
    if isinstance(answers, str):
        answers = [answers]
    if not isinstance(answers, list) or not answers or not all(isinstance(a, str) for a in answers):
        return None
    if not isinstance(supporting, list) or not all(type(i) is int for i in supporting):
        return None
    return _Truth(frozenset(normalize_answer(a, STYLE) for a in answers), tuple(sorted(set(supporting))))


#: Decoded gold answers and supporting ids, or None when malformed.
parse_ground_truth = truth_parser(_truth)


def compute_score(
    data_source: object, solution_str: object, ground_truth: object, extra_info: object = None, *,
    bonus: float = 10.0, **kwargs: Any,
) -> dict[str, float]:
    """Score one ARENA completion (verl ``custom_reward_function``); keys :data:`PARTS`."""
    if isinstance(bonus, bool) or not isinstance(bonus, (int, float)) or not math.isfinite(bonus):
        raise ValueError(f"ARENA reward option bonus must be a finite number; got {bonus!r}")
    truth = parse_ground_truth(ground_truth)
    if truth is None:
        return {**dict.fromkeys(PARTS, 0.0), "parse_status": float(PARSE_STATUSES.index("bad_ground_truth"))}
    parsed = parse_arena(solution_str)
    fmt = float(parsed.format_ok)
    accuracy = float(parsed.answer is not None and normalize_answer(parsed.answer, STYLE) in truth.normalized)
    relevance = relevance_score(parsed.relevance, truth.supporting)
    extra = float(bonus) if fmt == accuracy == relevance == 1.0 else 0.0
    return {"score": fmt + accuracy + relevance + extra, "format": fmt, "accuracy": accuracy, "relevance": relevance,
            "bonus": extra, "parse_status": 0.0}


def relevance_accuracy(solution_str: object, supporting: list[int] | tuple[int, ...]) -> dict[str, float]:
    """For ``rag eval``: exact relevance-id match, overlap, id precision and recall against gold ids (1-based)."""
    predicted = parse_arena(solution_str).relevance or ()
    gold = set(supporting)
    hits = len(gold & set(predicted))
    return {
        "relevance_exact": float(tuple(sorted(gold)) == predicted),
        "relevance_overlap": float(hits > 0),
        "relevance_precision": hits / len(predicted) if predicted else 0.0,
        "relevance_recall": hits / len(gold) if gold else 1.0,
    }
