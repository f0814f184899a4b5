"""The RL reward of a groupwise completion, in verl's custom reward function signature.

Point verl at it: ``reward.custom_reward_function.path=pkg://rearank.methods.groupwise.reward`` (or this file's path),
``name=compute_score``; options go in ``reward_kwargs``.

``R_H = recall_weight * R_recall + rank_weight * R_rank + dist_weight * R_dist`` (paper: 0.2 / 0.5 / 0.1)
when the completion has ``<reason>…</reason><answer>…</answer>`` and the answer holds a JSON object;
``tags_only_score`` (0) when only the tags are right; ``invalid_score`` (-1) otherwise.

The completion's scores come from :func:`rearank.methods.groupwise.parser.parse_scores`; a document without a
valid score counts 0. The *predicted order* sorts documents by score, ties broken pessimistically (the
lower label first), so constant scores cannot ride on a good presented order.

* ``R_rank = (NDCG@k + RBO) / 2``: nDCG@k of the predicted order (ideal over the group's labels) and
  rank-biased overlap (persistence ``rbo_p``) of the predicted order against the ideal order; the ideal
  order sorts by label with ties in predicted order, so every ideal ranking scores RBO = 1.
* ``R_recall``: relevant documents (label >= ``rel_threshold``) in the predicted top-k, divided by
  ``min(#relevant, k)`` so that an ideal order scores 1.
* ``R_dist = max(0, 1 - KL(S_gt || S_pred))``: ``S_gt_i ∝ label_i / max_label + eps`` and
  ``S_pred_i ∝ score_i / 10 + eps`` (``max_label``: option, default the group's highest label);
  epsilon smoothing keeps KL finite and the clip keeps R_dist in [0, 1]. ``dist_floor=False`` gives the
  paper's unclipped ``1 - KL`` (Eq. 8), as low as ``1 - log(1/eps)``-ish; the floor is the default so that a
  well-formed answer never scores below the 0 of a broken JSON object (Eq. 10).
* A group without a relevant (or positive) document gives every order nDCG = recall = 1: any order is ideal.

So R_H lies in [0, recall_weight + rank_weight + dist_weight] (with ``dist_floor``). Ground truth is ``{"labels": [...]}``
(graded labels in presented order), decoded like the listwise reward; malformed ground truth scores 0 with
``parse_status`` = index of ``bad_ground_truth``. :func:`compute_score` never raises for any completion or
ground truth; it raises ``ValueError`` only for an invalid option (a configuration error that should stop the run
at its first step).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from functools import lru_cache
from operator import mul, neg
from typing import Any, NamedTuple

from rearank.measures.ndcg import dcg_at_k, ideal_dcg_at_k
from rearank.measures.rbo import rbo
from rearank.methods.groupwise.parser import MAX_SCORE, STATUSES, parse_scores
from rearank.methods.truth import parse_ground_truth

#: ``parse_status`` is logged as the index into this tuple (verl logs numeric reward parts only).
PARSE_STATUSES = (*STATUSES, "bad_ground_truth")

#: Options of the listwise reward (:mod:`rearank.methods.listwise.reward`): a sign that the listwise recipe's
#: kwargs came along.
LISTWISE_OPTIONS = ("rank_reward", "tags_weight", "answer_weight")

PARTS = ("score", "r_recall", "r_rank", "r_dist", "ndcg", "rbo", "kl", "format_tags", "format_json", "parse_status")


@lru_cache(maxsize=256)
def _check_options(weights: tuple[Any, ...], k: Any, rbo_p: Any, rel_threshold: Any, eps: Any, max_label: Any,
                   dist_floor: Any = True) -> None:
    """Raise ValueError for an invalid option (checked once per distinct set of options)."""
    if not isinstance(dist_floor, bool):
        raise ValueError(f"groupwise reward option dist_floor must be true or false; got {dist_floor!r}")  # noqa: TRY004 - every option error is a ValueError
    numbers = {
        "recall_weight": weights[0], "rank_weight": weights[1], "dist_weight": weights[2],
        "tags_only_score": weights[3], "invalid_score": weights[4], "rel_threshold": rel_threshold, "eps": eps,
    }
    if max_label is not None:
        numbers["max_label"] = max_label
    for name, value in numbers.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"groupwise reward option {name} must be a finite number; got {value!r}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"groupwise reward option k must be an integer >= 1; got {k!r}")
    if isinstance(rbo_p, bool) or not isinstance(rbo_p, (int, float)) or not 0.0 < rbo_p < 1.0:
        raise ValueError(f"groupwise reward option rbo_p must be in (0, 1); got {rbo_p!r}")
    if eps <= 0:
        raise ValueError(f"groupwise reward option eps must be > 0; got {eps!r}")
    if max_label is not None and max_label <= 0:
        raise ValueError(f"groupwise reward option max_label must be > 0; got {max_label!r}")


class _Truth(NamedTuple):
    """What the reward needs from a group's labels, computed once per ground truth and options.

    (A NamedTuple, not a dataclass: verl may load this file by path, outside ``sys.modules``.)
    """

    labels: tuple[float, ...]
    neg_labels: tuple[float, ...]
    idcg: float
    relevant: tuple[bool, ...]
    recall_denominator: int
    gt_dist: tuple[float, ...]
    gt_neg_entropy: float  # sum p log p of the label distribution


@lru_cache(maxsize=4096)
def _truth(labels: tuple[float, ...], k: int, rel_threshold: float, max_label: float | None, eps: float) -> _Truth:
    top = max(labels, default=0.0)
    scale = max_label or (top if top > 0 else 1.0)
    weights = [(label / scale if label > 0 else 0.0) + eps for label in labels]
    total = sum(weights)
    dist = [w / total for w in weights]
    relevant = [label >= rel_threshold for label in labels]
    return _Truth(
        labels=labels,
        neg_labels=tuple(map(neg, labels)),
        idcg=ideal_dcg_at_k(labels, k),
        relevant=tuple(relevant),
        recall_denominator=min(sum(relevant), k),
        gt_dist=tuple(dist),
        gt_neg_entropy=sum(map(mul, dist, map(math.log, dist))),
    )


def group_reward_parts(
    labels: Sequence[float],
    scores: Sequence[float],
    *,
    k: int = 10,
    rbo_p: float = 0.9,
    rel_threshold: float = 1,
    eps: float = 0.01,
    max_label: float | None = None,
    dist_floor: bool = True,
) -> dict[str, float]:
    """R_recall, R_rank, R_dist and their ingredients for 0-10 ``scores`` against graded ``labels``."""
    truth = _truth(tuple(labels), k, rel_threshold, max_label, eps)
    order = sorted(range(len(truth.labels)), key=list(zip(map(neg, scores), truth.labels)).__getitem__)
    ndcg = dcg_at_k(list(map(truth.labels.__getitem__, order)), k) / truth.idcg if truth.idcg > 0 else 1.0
    overlap = rbo(order, sorted(order, key=truth.neg_labels.__getitem__), rbo_p)
    if truth.recall_denominator:
        recall = sum(map(truth.relevant.__getitem__, order[:k])) / truth.recall_denominator
    else:
        recall = 1.0
    pred = [s / MAX_SCORE + eps for s in scores]
    kl = truth.gt_neg_entropy - sum(map(mul, truth.gt_dist, map(math.log, pred))) + math.log(sum(pred))
    return {
        "r_recall": recall,
        "r_rank": (ndcg + overlap) / 2,
        "r_dist": max(0.0, 1.0 - kl) if dist_floor else 1.0 - kl,
        "ndcg": ndcg,
        "rbo": overlap,
        "kl": kl,
    }


#: :func:`group_reward_parts`' options and their defaults, in the order :func:`_check_options` takes them.
_PART_DEFAULTS: dict[str, Any] = {
    name: p.default for name, p in inspect.signature(group_reward_parts).parameters.items() if p.kind is p.KEYWORD_ONLY
}


def compute_score(
    data_source: object,
    solution_str: object,
    ground_truth: object,
    extra_info: object = None,
    *,
    recall_weight: float = 0.2,
    rank_weight: float = 0.5,
    dist_weight: float = 0.1,
    tags_only_score: float = 0.0,
    invalid_score: float = -1.0,
    reasoning: bool = True,
    **kwargs: Any,
) -> dict[str, float]:
    """Score one groupwise completion (verl ``custom_reward_function``); returns ``score`` plus its parts.

    Keys (:data:`PARTS`): score, r_recall, r_rank, r_dist, ndcg, rbo, kl, format_tags, format_json,
    parse_status (index into :data:`PARSE_STATUSES`); the parts are 0 unless tags and JSON are valid.
    Besides the weights and scores above it takes :func:`group_reward_parts`' options (k, rbo_p, rel_threshold,
    eps, max_label, dist_floor), with the same defaults.
    ``reasoning=False`` scores answer-only rows (``synth --reasoning off``): the ``<answer>`` tags alone are the
    format. ``data_source``, ``extra_info`` and other keyword arguments verl passes are unused; the listwise reward's
    options (:data:`LISTWISE_OPTIONS`) raise ValueError, since they mean the wrong reward_kwargs were given.
    """
    listwise = [name for name in LISTWISE_OPTIONS if name in kwargs]
    if listwise:
        raise ValueError(
            f"{', '.join(listwise)}: options of the listwise reward, not the groupwise one; set reward_kwargs to "
            "the groupwise options (recall_weight, rank_weight, dist_weight, k, rbo_p, rel_threshold, eps, max_label, "
            "dist_floor, tags_only_score, invalid_score)"
        )
    options = {name: kwargs.get(name, default) for name, default in _PART_DEFAULTS.items()}
    _check_options((recall_weight, rank_weight, dist_weight, tags_only_score, invalid_score), *options.values())
    result = dict.fromkeys(PARTS, 0.0)
    labels = parse_ground_truth(ground_truth)
    if labels is None:
        result["parse_status"] = float(PARSE_STATUSES.index("bad_ground_truth"))
        return result
    parsed = parse_scores(solution_str, len(labels), reasoning=reasoning)
    result["format_tags"] = float(parsed.has_tags)
    result["format_json"] = float(parsed.json_ok)
    result["parse_status"] = float(PARSE_STATUSES.index(parsed.status))
    if not parsed.has_tags:
        result["score"] = float(invalid_score)
        return result
    if not parsed.json_ok:
        result["score"] = float(tags_only_score)
        return result
    parts = group_reward_parts(labels, parsed.filled(), **options)
    result.update(parts)
    result["score"] = recall_weight * parts["r_recall"] + rank_weight * parts["r_rank"] + dist_weight * parts["r_dist"]
    return result
