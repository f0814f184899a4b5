"""Answer metrics: normalisation (SQuAD or ARENA style), EM, token F1, Hit, answer recall, supporting recall."""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence

STYLES = ("squad", "arena")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_DROP_PUNCT = str.maketrans("", "", string.punctuation)
_SPACE_PUNCT = str.maketrans({ch: " " for ch in string.punctuation})  # '_' is in string.punctuation


def normalize_answer(text: str, style: str = "squad") -> str:
    """Lower-case, remove punctuation (squad) or turn it and ``_`` into spaces (arena), drop a/an/the, collapse spaces."""
    if style == "squad":
        text = text.lower().translate(_DROP_PUNCT)
    elif style == "arena":
        text = text.lower().translate(_SPACE_PUNCT)
    else:
        raise ValueError(f"unknown normalisation style {style!r}; expected one of {STYLES}")
    return " ".join(_ARTICLES.sub(" ", text).split())


def _golds(answers: str | Iterable[str]) -> list[str]:
    return [answers] if isinstance(answers, str) else list(answers)


def exact_match(prediction: str, answers: str | Iterable[str], style: str = "squad") -> float:
    """1.0 when the normalised prediction equals a normalised gold answer."""
    pred = normalize_answer(prediction, style)
    return float(any(pred == normalize_answer(a, style) for a in _golds(answers)))


def _f1(pred_tokens: list[str], gold_tokens: list[str]) -> float:
    common = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred_tokens), common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, answers: str | Iterable[str], style: str = "squad") -> float:
    """Token-level F1 of the normalised strings, the maximum over gold answers."""
    pred = normalize_answer(prediction, style).split()
    return max((_f1(pred, normalize_answer(a, style).split()) for a in _golds(answers)), default=0.0)


def _contains(haystack: str, needle: str) -> bool:
    """Whole-token containment of normalised strings (an empty needle never matches)."""
    return bool(needle) and f" {needle} " in f" {haystack} "


def hit(prediction: str, answers: str | Iterable[str], style: str = "squad") -> float:
    """1.0 when a normalised gold answer occurs (as whole tokens) in the normalised response."""
    pred = normalize_answer(prediction, style)
    return float(any(_contains(pred, normalize_answer(a, style)) for a in _golds(answers)))


def answer_recall(passage_texts: Sequence[str], answers: str | Iterable[str], k: int, style: str = "squad") -> float:
    """1.0 when a gold answer occurs in one of the first ``k`` passages (DPR ``has_answer`` style)."""
    golds = [g for g in (normalize_answer(a, style) for a in _golds(answers)) if g]
    return float(any(_contains(normalize_answer(t, style), g) for t in passage_texts[:k] for g in golds))


def support_recall(selected_pids: Iterable[str], supporting: Iterable[str]) -> float:
    """Share of the supporting passage ids among the selected ones (1.0 when there are none to find)."""
    gold = set(supporting)
    if not gold:
        return 1.0
    return len(gold & set(selected_pids)) / len(gold)
