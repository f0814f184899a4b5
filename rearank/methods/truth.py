"""The ground truth of a ranking row (the listwise and groupwise verl rows): the graded labels of the presented
passages in presented order, and optionally the grades of the query's whole judged pool, as
``{"labels": [...], "pool": [...]}`` or a plain list of labels; JSON text, bytes or decoded (parquet gives numpy
arrays). Both methods' rewards read it here, each distinct text decoded once; a malformed one is None, never an
error."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from rearank.measures.ndcg import dcg_at_k, ideal_dcg_at_k

#: The cutoff of the nDCG the truth carries.
K = 10
#: Exact types of a grade (bool and numeric strings are malformed labels).
NUMBERS = (int, float)


@dataclass(frozen=True)
class RankingTruth:
    """A decoded ground truth: labels in presented order, their ideal DCG@10, the presented order's nDCG@10 and the
    ideal DCG@10 of the query's judged pool (the labels' own when the truth gives no pool)."""

    labels: tuple[float, ...]
    idcg: float
    init_ndcg: float
    pool_idcg: float


@lru_cache(maxsize=8192)
def _truth_from_json(text: str) -> RankingTruth | None:
    """Decode a ground-truth JSON string once (every rollout of a prompt shares it)."""
    try:
        return _truth_from_value(json.loads(text))
    except (ValueError, RecursionError, OverflowError):  # invalid JSON, too deep, a number too large for a float
        return None


def _grades(value: Any) -> tuple[float, ...] | None:
    """Finite numeric grades from a list/tuple/array; None when malformed."""
    if hasattr(value, "tolist"):  # numpy arrays from parquet
        value = value.tolist()
    if not isinstance(value, (list, tuple)) or not all(type(x) in NUMBERS for x in value):
        return None
    grades = tuple(map(float, value))
    return grades if all(map(math.isfinite, grades)) else None


def _truth_from_value(value: Any) -> RankingTruth | None:
    pool = None
    if isinstance(value, dict):
        pool = _grades(value["pool"]) if value.get("pool") is not None else None
        value = value.get("labels")
    labels = _grades(value)
    if not labels:
        return None
    idcg = ideal_dcg_at_k(labels, K)
    pool_idcg = idcg if pool is None else ideal_dcg_at_k(pool, K)
    return RankingTruth(labels, idcg, dcg_at_k(labels, K) / idcg if idcg > 0 else 0.0, pool_idcg)


def parse_truth(ground_truth: object) -> RankingTruth | None:
    """A :class:`RankingTruth` from the ground truth (JSON text, bytes or decoded); None when malformed."""
    if isinstance(ground_truth, bytes):
        try:
            ground_truth = ground_truth.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if isinstance(ground_truth, str):
        return _truth_from_json(ground_truth)
    try:
        return _truth_from_value(ground_truth)
    except Exception:  # noqa: BLE001 -- any decoded value, even an object whose tolist()/get() fails, is data
        return None


def parse_ground_truth(ground_truth: object) -> tuple[float, ...] | None:
    """Labels from ``{"labels": [...]}`` or a plain list, as a JSON string, bytes or decoded; None when malformed."""
    truth = parse_truth(ground_truth)
    return None if truth is None else truth.labels
