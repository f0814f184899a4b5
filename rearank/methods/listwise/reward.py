"""The RL reward of a listwise reranking completion, in verl's custom reward function signature.

``r = rank_weight * r_rank + tags_weight * r_format1 + answer_weight * r_format2`` (paper: 0.8 / 0.1 / 0.1):

* ``r_rank`` (``rank_reward="normalized"``, the paper's choice) =
  ``(NDCG@10(σ) - NDCG@10(τ)) / (NDCG@10* - NDCG@10(τ))`` clipped to ``[-1, 1]``, where σ is the model's
  permutation (parsed and repaired by :func:`rearank.methods.listwise.answer.parse_answer`), τ the presented order and
  NDCG@10* the best nDCG@10 achievable on the presented passages (1.0 when any label is positive).
  ``"absolute"`` = NDCG@10(σ) in ``[0, 1]``; ``"difference"`` = NDCG@10(σ) - NDCG@10(τ) in ``[-1, 1]``.
* ``r_format1`` = 1 when ``<think>…</think>`` then ``<answer>…</answer>`` are present (``has_tags``;
  ``reasoning=False``, for answer-only rows: when ``<answer>…</answer>`` is).
* ``r_format2`` = 1 when the answer reads exactly ``[i] > [j] > …`` with distinct in-range ids
  (``strict_format``).

Edge cases (all documented in docs/training.md):

* Every completion is scored through the parser's repaired permutation, the same one inference applies:
  duplicates keep their first place, out-of-range ids are dropped, missing ids are appended in presented
  order; a truncated answer keeps the ids it got to. Such answers earn the r_rank of that permutation and
  lose r_format2 (and r_format1 when a tag is missing). No id at all leaves σ = τ, so r_rank = 0.
* The presented order is already ideal (zero denominator): r_rank = 0 if σ is ideal too (no gain, as for
  keeping the presented order anywhere), else -1 (the limit of the clipped formula as the denominator -> 0).
* No positive label in the set: no ranking signal, r_rank = 0 for every completion.
* Malformed ground truth: score 0, every part 0, ``parse_status = PARSE_STATUSES.index("bad_ground_truth")``.

``variant="released"`` (``reward_kwargs.variant=released``) scores as the authors' released training reward
does, beside the default above (differences tabled in docs/training.md):

* ``r_format1`` = 1 only when the whole completion is ``<think>…</think>``, optional whitespace,
  ``<answer>…</answer>`` (nothing before or after; tags case-sensitive);
* ``r_format2`` = 1 when the first ``<answer>…</answer>`` block contains a ``[d] > … > [d]`` chain (one ``[d]``
  counts);
* σ = every run of digits in the first answer block (the whole completion when there is none), 1-based,
  repeats and out-of-range numbers dropped, missing ids appended in presented order;
* nDCG@10 of σ, τ and the set's best order are normalised by the query's whole judged pool (the ground
  truth's ``pool`` grades; the set's own labels when it has none) and rounded to 5 decimals;
  ``r_rank = (nDCG(σ) - nDCG(τ)) / (best - nDCG(τ))``, unclipped, and 0 when best == nDCG(τ).

:func:`compute_score` never raises for any completion or ground truth; it raises ``ValueError`` only for
an invalid reward option (a configuration error that should stop the run at its first step).
"""

from __future__ import annotations

import math
import re
from typing import Any

from rearank.measures.ndcg import dcg_at_k
from rearank.methods.listwise.answer import STATUSES, parse_answer
from rearank.methods.truth import NUMBERS, K, RankingTruth, parse_truth

#: ``rank_reward`` options: the paper's normalized gain and its two ablations.
RANK_REWARDS = ("normalized", "absolute", "difference")

#: ``variant`` options: rearank's reward, or the released training reward's rules.
VARIANTS = ("default", "released")

#: ``parse_status`` is logged as the index into this tuple (verl logs numeric reward parts only).
PARSE_STATUSES = (*STATUSES, "bad_ground_truth")

_EPS = 1e-9
_BAD_GROUND_TRUTH = float(PARSE_STATUSES.index("bad_ground_truth"))
_RELEASED_FORMAT = re.compile(r"<think>.*</think>\s*<answer>.*</answer>", re.DOTALL)
_RELEASED_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_RELEASED_CHAIN = re.compile(r"\[\d+\](?:\s*>\s*\[\d+\])*")
_DIGITS = re.compile(r"\d+")
_ROUND = 5


def rank_reward_value(ndcg: float, init_ndcg: float, ideal_ndcg: float, rank_reward: str = "normalized") -> float:
    """The ranking part r_rank for a completion's nDCG, the presented order's nDCG and the best achievable."""
    if rank_reward == "absolute":
        return ndcg
    if rank_reward == "difference":
        return ndcg - init_ndcg
    if ideal_ndcg <= 0.0:
        return 0.0
    gap = ideal_ndcg - init_ndcg
    if gap <= _EPS:
        return 0.0 if ndcg >= init_ndcg - _EPS else -1.0
    if ndcg >= ideal_ndcg - _EPS:
        return 1.0
    return max(-1.0, min(1.0, (ndcg - init_ndcg) / gap))


def _check_options(rank_reward: str, weights: tuple[float, float, float], variant: str = "default") -> None:
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(VARIANTS)}; got {variant!r}")
    if variant == "released" and rank_reward != "normalized":
        raise ValueError(f"variant=released uses the normalized rank reward; got rank_reward={rank_reward!r}")
    if rank_reward not in RANK_REWARDS:
        raise ValueError(f"rank_reward must be one of {', '.join(RANK_REWARDS)}; got {rank_reward!r}")
    for name, weight in zip(("rank_weight", "tags_weight", "answer_weight"), weights):
        if type(weight) not in NUMBERS or not math.isfinite(weight):
            raise ValueError(f"{name} must be a finite number; got {weight!r}")


def compute_score(
    data_source: object,
    solution_str: object,
    ground_truth: object,
    extra_info: object = None,
    *,
    rank_reward: str = "normalized",
    rank_weight: float = 0.8,
    tags_weight: float = 0.1,
    answer_weight: float = 0.1,
    variant: str = "default",
    reasoning: bool = True,
    **kwargs: Any,
) -> dict[str, float]:
    """Score one completion (verl ``custom_reward_function``); returns ``score`` plus its numeric parts.

    Keys: score, ndcg, init_ndcg, ideal_ndcg, r_rank, format_tags, format_answer, parse_status (index into
    :data:`PARSE_STATUSES`; with ``variant="released"`` it is how rearank's parser classifies the completion,
    for comparison). ``data_source``, ``extra_info`` and extra keyword arguments verl passes are unused.
    """
    _check_options(rank_reward, (rank_weight, tags_weight, answer_weight), variant)
    truth = parse_truth(ground_truth)
    if truth is None:
        return {
            "score": 0.0,
            "ndcg": 0.0,
            "init_ndcg": 0.0,
            "ideal_ndcg": 0.0,
            "r_rank": 0.0,
            "format_tags": 0.0,
            "format_answer": 0.0,
            "parse_status": _BAD_GROUND_TRUTH,
        }
    labels = truth.labels
    parsed = parse_answer(solution_str, len(labels))
    if variant == "released":
        parts = released_parts(solution_str if isinstance(solution_str, str) else "", truth)
        return {
            "score": rank_weight * parts["r_rank"] + tags_weight * parts["format_tags"]
            + answer_weight * parts["format_answer"],
            **parts,
            "parse_status": float(PARSE_STATUSES.index(parsed.status)),
        }
    if truth.idcg > 0:
        ndcg = dcg_at_k([labels[i] for i in parsed.permutation[:K]], K) / truth.idcg
        ideal_ndcg = 1.0
    else:
        ndcg = ideal_ndcg = 0.0
    init_ndcg = truth.init_ndcg
    r_rank = rank_reward_value(ndcg, init_ndcg, ideal_ndcg, rank_reward)
    has_tags = parsed.has_tags if reasoning else isinstance(solution_str, str) and bool(
        _RELEASED_ANSWER.search(solution_str))
    format_tags = 1.0 if has_tags else 0.0
    format_answer = 1.0 if parsed.strict_format else 0.0
    return {
        "score": rank_weight * r_rank + tags_weight * format_tags + answer_weight * format_answer,
        "ndcg": ndcg,
        "init_ndcg": init_ndcg,
        "ideal_ndcg": ideal_ndcg,
        "r_rank": r_rank,
        "format_tags": format_tags,
        "format_answer": format_answer,
        "parse_status": float(PARSE_STATUSES.index(parsed.status)),
    }


def released_permutation(text: str, n: int) -> list[int]:
    """σ as the released reward reads it: every run of digits in the first answer block (else the whole text),
    1-based, repeats and out-of-range numbers dropped, missing ids appended in presented order (0-based)."""
    block = _RELEASED_ANSWER.search(text)
    seen: dict[int, None] = {}
    for digits in _DIGITS.findall(block.group(1) if block else text):
        k = int(digits) - 1
        if 0 <= k < n:
            seen.setdefault(k, None)
    return [*seen, *(i for i in range(n) if i not in seen)]


def released_parts(text: str, truth: RankingTruth) -> dict[str, float]:
    """The released reward's parts (see the module docstring) for one completion."""
    labels, pool = truth.labels, truth.pool_idcg
    order = released_permutation(text, len(labels))

    def ndcg(ranked: list[float]) -> float:
        return round(dcg_at_k(ranked, K) / pool, _ROUND) if pool > 0 else 0.0

    rerank, init, best = ndcg([labels[i] for i in order]), ndcg(list(labels)), ndcg(sorted(labels, reverse=True))
    block = _RELEASED_ANSWER.search(text)
    return {
        "ndcg": rerank,
        "init_ndcg": init,
        "ideal_ndcg": best,
        "r_rank": 0.0 if best == init else (rerank - init) / (best - init),
        "format_tags": 1.0 if _RELEASED_FORMAT.fullmatch(text) else 0.0,
        "format_answer": 1.0 if block and _RELEASED_CHAIN.search(block.group(1)) else 0.0,
    }
