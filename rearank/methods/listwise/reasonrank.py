"""ReasonRank's multi-view ranking reward (Liu et al., arXiv 2508.07050) for a listwise window, in verl's custom
reward function signature; recipes give verl ``pkg://rearank.methods.listwise.reasonrank``.

``R_m = NDCG@10 + 0.2 * Recall@10 + 0.1 * RBO(predicted list, gold list)``, and

* ``R = R_m`` when the completion has the format and its answer is a full permutation of the window's ids;
* ``R = 0`` when the format is right but the answer is not a full permutation: as many ids as passages, each once,
  each in range (read by the one listwise parser, :func:`rearank.methods.listwise.answer.parse_answer`);
* ``R = -1`` when the format is broken: no ``<think>…</think>``, optional whitespace, ``<answer>…</answer>``
  (searched, first match; ``reasoning=False``, the answer-only variant: no ``<answer>…</answer>``).

The ground truth is a JSON object (or its decoded dict) ``{"ids": [docid of [1], [2], …], "gold": [docids, best
first], "relevant": {docid: grade}}``: NDCG@10 as trec_eval's ``ndcg_cut_10`` with the grade as gain and the ideal
over every relevant passage, Recall@10 over grades >= 1, RBO as the ``rbo`` package's default ``p = 1.0`` (average
overlap, :func:`rearank.measures.rbo.average_overlap`) of the predicted and the gold docids. A row of
ReasonRank's own RL data (``extra_info`` with ``initial_list``, ``final_list``, ``relevant_docids``; every relevant
passage grade 1) is read the same way. A ground truth that does not decode scores 0 with ``bad_ground_truth`` 1.
:func:`compute_score` never raises for a completion or a ground truth.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rearank.measures.ndcg import dcg_at_k, ideal_dcg_at_k
from rearank.measures.rbo import average_overlap
from rearank.methods.listwise.answer import parse_answer

K = 10
#: The paper's weights of Recall@10 and RBO beside NDCG@10.
RECALL_WEIGHT, RBO_WEIGHT = 0.2, 0.1
_REASONING_FORMAT = re.compile(r"<think>.*?</think>\s*<answer>(.*?)</answer>", re.DOTALL)
_ANSWER_FORMAT = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_PARTS = ("ndcg", "recall", "rbo", "format", "permutation", "bad_ground_truth")


@dataclass(frozen=True)
class Truth:
    """A decoded ground truth: the window's docids in presented order, the gold order and the relevance grades."""

    ids: tuple[str, ...]
    gold: tuple[str, ...]
    relevant: Mapping[str, float]


def truth_record(ids: list[str], gold: list[str], relevant: Mapping[str, float]) -> dict[str, Any]:
    """The ground-truth object rows carry (``json.dumps`` it for verl's ``reward_model.ground_truth``)."""
    return {"ids": list(ids), "gold": list(gold), "relevant": dict(relevant)}


def parse_truth(ground_truth: object, extra_info: object = None) -> Truth | None:
    """A :class:`Truth` from the ground truth (JSON text, bytes or dict), else from ReasonRank's ``extra_info``
    fields; None when neither decodes (docids not distinct, a gold list that is not a permutation of ``ids``, a
    grade that is not a finite number)."""
    value: Any = ground_truth
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            value = None
    if not (isinstance(value, Mapping) and "ids" in value) and isinstance(extra_info, Mapping) \
            and "initial_list" in extra_info:
        value = {"ids": extra_info.get("initial_list"), "gold": extra_info.get("final_list"),
                 "relevant": {d: 1 for d in _listed(extra_info.get("relevant_docids")) or ()}}
    try:
        return _truth(value)
    except (TypeError, ValueError, AttributeError):
        return None


def _listed(value: Any) -> list[str] | None:
    if hasattr(value, "tolist"):  # numpy arrays from parquet
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        return None
    return [str(v) for v in value]


def _truth(value: Any) -> Truth | None:
    if not isinstance(value, Mapping):
        return None
    ids, gold, relevant = _listed(value.get("ids")), _listed(value.get("gold")), value.get("relevant")
    if not ids or gold is None or len(set(ids)) != len(ids) or sorted(gold) != sorted(ids):
        return None
    if not isinstance(relevant, Mapping):
        return None
    grades = {}
    for docid, grade in relevant.items():
        if type(grade) not in (int, float) or not math.isfinite(grade):
            return None
        grades[str(docid)] = float(grade)
    return Truth(tuple(ids), tuple(gold), grades)


def ranking_parts(predicted: list[str], truth: Truth) -> dict[str, float]:
    """NDCG@10, Recall@10 and RBO of a predicted order of the window's docids against ``truth``."""
    grades = truth.relevant
    ideal = ideal_dcg_at_k(list(grades.values()), K)
    top = predicted[:K]
    ndcg = dcg_at_k([grades.get(d, 0.0) for d in top], K) / ideal if ideal > 0 else 0.0
    relevant = {d for d, g in grades.items() if g >= 1}
    recall = sum(d in relevant for d in top) / len(relevant) if relevant else 0.0
    return {"ndcg": ndcg, "recall": recall, "rbo": average_overlap(predicted, list(truth.gold))}


def compute_score(
    data_source: object,
    solution_str: object,
    ground_truth: object,
    extra_info: object = None,
    *,
    reasoning: bool = True,
    recall_weight: float = RECALL_WEIGHT,
    rbo_weight: float = RBO_WEIGHT,
    **kwargs: Any,
) -> dict[str, float]:
    """Score one completion (verl ``custom_reward_function``): ``score`` and its parts (``ndcg``, ``recall``,
    ``rbo``, ``format`` and ``permutation`` as 1/0, ``bad_ground_truth``). ``reasoning=False`` scores the
    answer-only variant (``reward_kwargs.reasoning=false``). ``data_source`` and extra keyword arguments are unused."""
    parts = dict.fromkeys(_PARTS, 0.0)
    truth = parse_truth(ground_truth, extra_info)
    if truth is None:
        return {"score": 0.0, **parts, "bad_ground_truth": 1.0}
    text = solution_str if isinstance(solution_str, str) else ""
    match = (_REASONING_FORMAT if reasoning else _ANSWER_FORMAT).search(text)
    if match is None:
        return {"score": -1.0, **parts}
    parts["format"] = 1.0
    n = len(truth.ids)
    parsed = parse_answer(match.group(1), n)
    if parsed.n_ids != n or parsed.n_duplicates or parsed.n_out_of_range:
        return {"score": 0.0, **parts}
    parts["permutation"] = 1.0
    parts.update(ranking_parts([truth.ids[i] for i in parsed.permutation], truth))
    score = parts["ndcg"] + recall_weight * parts["recall"] + rbo_weight * parts["rbo"]
    return {"score": score, **parts}
