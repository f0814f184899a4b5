"""Fast nDCG on small label lists (trec_eval gains: linear relevance, log2 discount).

Used by the RL reward and by data synthesis on 20-passage sets, where calling a
trec_eval binding per set would dominate the cost. Agrees with trec_eval's
``ndcg_cut.k`` when the ideal is taken over the same labels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

_DISCOUNT = tuple(1.0 / math.log2(i + 2) for i in range(1000))


def dcg_at_k(labels: Sequence[float], k: int = 10) -> float:
    """DCG@k of relevance labels given in ranked order (negative labels count as 0)."""
    total = 0.0
    for i, rel in enumerate(labels[:k]):
        if rel > 0:
            total += rel * (_DISCOUNT[i] if i < 1000 else 1.0 / math.log2(i + 2))
    return total


def ideal_dcg_at_k(labels: Sequence[float], k: int = 10) -> float:
    """DCG@k of the best ordering of ``labels``."""
    return dcg_at_k(sorted(labels, reverse=True), k)


def ndcg_at_k(labels: Sequence[float], k: int = 10, ideal: float | None = None) -> float:
    """nDCG@k of ``labels`` in ranked order; 0.0 when no label is positive.

    ``ideal`` is the ideal DCG@k to normalise by (default: the best order of ``labels``);
    pass it when the judged pool is larger than the ranked list.
    """
    idcg = ideal_dcg_at_k(labels, k) if ideal is None else ideal
    return dcg_at_k(labels, k) / idcg if idcg > 0 else 0.0
