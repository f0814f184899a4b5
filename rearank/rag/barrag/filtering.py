"""BAR-RAG's training filter: keep a question whose selector samples give the reader varied success.

Per question, 8 selector samples are each read 10 times (temperature 0.7); a sample's accuracy is the share of
its reader answers whose generator reward is >= tau (the selector reward's success criterion). The question is
kept when the accuracies are not all equal, their mean lies in [0.25, 0.85] and their (population) variance is
>= 0.02 (released values).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

SELECTOR_SAMPLES = 8
READER_SAMPLES = 10
READER_TEMPERATURE = 0.7
MEAN_RANGE = (0.25, 0.85)
MIN_VARIANCE = 0.02


class FilterVerdict(NamedTuple):
    keep: bool
    mean: float
    variance: float
    reason: str  # "kept", "all_equal", "mean", "variance", "no_samples"


def judge(accuracies: Sequence[float], mean_range: tuple[float, float] = MEAN_RANGE,
          min_variance: float = MIN_VARIANCE) -> FilterVerdict:
    """Apply the keep rules to one question's per-sample accuracies."""
    if not accuracies:
        return FilterVerdict(False, 0.0, 0.0, "no_samples")
    mean = sum(accuracies) / len(accuracies)
    variance = sum((a - mean) ** 2 for a in accuracies) / len(accuracies)
    if len(set(accuracies)) == 1:
        return FilterVerdict(False, mean, variance, "all_equal")
    if not mean_range[0] <= mean <= mean_range[1]:
        return FilterVerdict(False, mean, variance, "mean")
    if variance < min_variance - 1e-12:
        return FilterVerdict(False, mean, variance, "variance")
    return FilterVerdict(True, mean, variance, "kept")
