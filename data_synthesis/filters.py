"""Which drawn sets are kept: labels, per-set nDCG@10, and the filters of the Rearank paper (section 4.1).

Two nDCG@10 figures per set (:class:`SetScores`): ``set_ndcg`` is nDCG@10 of the presented order normalised by
the best order of the same set (what the policy can reach; the paper's "initial nDCG" filter). ``pool_ndcg`` is
the ablation's measure: DCG@10 of the set's best order divided by the ideal DCG@10 of all the query's judgments,
i.e. how good a perfect reranking of this set is against the whole judged pool (the "ideal nDCG" filter).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rearank.measures.ndcg import ideal_dcg_at_k, ndcg_at_k
from rearank.types import Candidate

#: Filter names in the order they are checked; a rejected set is counted under the first filter it fails.
FILTERS = ("no_relevant", "initial_ndcg", "ideal_ndcg")


@dataclass(frozen=True)
class FilterConfig:
    """Which filters run and their thresholds (defaults: the paper's filters on, the ablation's off)."""

    no_relevant: bool = True
    initial_ndcg: bool = True
    ideal_ndcg: bool = False
    min_initial_ndcg: float = 0.1
    min_ideal_ndcg: float = 0.1

    def enabled(self) -> list[str]:
        """Names of the filters that are on."""
        return [name for name in FILTERS if getattr(self, name)]


@dataclass(frozen=True)
class SetScores:
    """nDCG@10 of a set as presented (over its own labels) and of its best order (over the query's pool)."""

    set_ndcg: float
    pool_ndcg: float
    n_relevant: int


@dataclass(frozen=True)
class KeptSet:
    """A set that passed the filters: its passages in presented order and their labels."""

    qid: str
    set_index: int
    candidates: tuple[Candidate, ...]
    labels: tuple[int, ...]
    scores: SetScores
    pool: tuple[int, ...] = ()


def labels_for(docids: Sequence[str], judged: Mapping[str, int]) -> list[int]:
    """Relevance of each docid: its qrels grade, 0 when unjudged; negative grades become 0."""
    return [max(int(judged.get(docid, 0)), 0) for docid in docids]


def query_ideal_dcg(judged: Mapping[str, int], k: int = 10) -> float:
    """Ideal DCG@k over all of a query's judgments."""
    return ideal_dcg_at_k([max(int(rel), 0) for rel in judged.values()], k)


def score_set(labels: Sequence[int], pool_ideal_dcg: float, k: int = 10) -> SetScores:
    """Score a set given its labels in presented order and the query's ideal DCG@k."""
    set_ideal = ideal_dcg_at_k(labels, k)
    initial = ndcg_at_k(labels, k, ideal=set_ideal)
    ideal = set_ideal / pool_ideal_dcg if pool_ideal_dcg > 0 else 0.0
    return SetScores(initial, ideal, sum(1 for rel in labels if rel > 0))


def rejection(scores: SetScores, config: FilterConfig) -> str | None:
    """The first enabled filter (in :data:`FILTERS` order) that rejects the set, or None to keep it."""
    if config.no_relevant and scores.n_relevant == 0:
        return "no_relevant"
    if config.initial_ndcg and scores.set_ndcg < config.min_initial_ndcg:
        return "initial_ndcg"
    if config.ideal_ndcg and scores.pool_ndcg < config.min_ideal_ndcg:
        return "ideal_ndcg"
    return None
