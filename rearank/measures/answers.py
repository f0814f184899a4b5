"""Answer metrics: normalisation (SQuAD's, or the :class:`Style` a method card declares), EM, token F1, Hit, answer
recall (DPR's has-answer rule), supporting recall."""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_DROP_PUNCT = str.maketrans("", "", string.punctuation)


class Style(str):
    """An answer normalisation, a text that is its name: lower-case, each character of ``spaces`` read as a space,
    the other punctuation removed, a/an/the dropped, whitespace collapsed. :data:`SQUAD` is SQuAD's script (``_`` is
    punctuation like any mark); a method card declares its own in its reading (ARENA, App. C.1: ``spaces="_"``, so
    ``"new_york"`` reads ``"new york"`` while ``"U.S."`` reads ``"us"``)."""

    spaces: str

    def __new__(cls, name: str, spaces: str = "") -> Style:  # noqa: PYI034 (Self needs Python 3.11)
        style = super().__new__(cls, name)
        style.spaces = spaces
        return style


#: SQuAD's official normalisation, the default.
SQUAD = Style("squad")


def normalize_answer(text: str, style: str = SQUAD) -> str:
    """Normalise ``text`` by ``style`` (a :class:`Style`, or the name ``squad``)."""
    if not isinstance(style, Style):
        if style != SQUAD:
            raise ValueError(f"unknown normalisation style {style!r}; expected {SQUAD} or a Style a method declares")
        style = SQUAD
    text = text.lower()
    for mark in style.spaces:
        text = text.replace(mark, " ")
    return " ".join(_ARTICLES.sub(" ", text.translate(_DROP_PUNCT)).split())


def _golds(answers: str | Iterable[str]) -> list[str]:
    return [answers] if isinstance(answers, str) else list(answers)


def exact_match(prediction: str, answers: str | Iterable[str], style: str = SQUAD) -> float:
    """1.0 when the normalised prediction equals a normalised gold answer."""
    pred = normalize_answer(prediction, style)
    return float(any(pred == normalize_answer(a, style) for a in _golds(answers)))


def _f1(pred_tokens: list[str], gold_tokens: list[str]) -> float:
    common = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred_tokens), common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, answers: str | Iterable[str], style: str = SQUAD) -> float:
    """Token-level F1 of the normalised strings, the maximum over gold answers."""
    pred = normalize_answer(prediction, style).split()
    return max((_f1(pred, normalize_answer(a, style).split()) for a in _golds(answers)), default=0.0)


def _contains(haystack: str, needle: str) -> bool:
    """Whole-token containment of normalised strings (an empty needle never matches)."""
    return bool(needle) and f" {needle} " in f" {haystack} "


def hit(prediction: str, answers: str | Iterable[str], style: str = SQUAD) -> float:
    """1.0 when a normalised gold answer occurs (as whole tokens) in the normalised response."""
    pred = normalize_answer(prediction, style)
    return float(any(_contains(pred, normalize_answer(a, style)) for a in _golds(answers)))


@lru_cache(maxsize=1)
def _dpr_tokenizer():
    from pyserini.eval.evaluate_dpr_retrieval import SimpleTokenizer  # DPR's / DrQA's tokenizer, as Pyserini ships it

    return SimpleTokenizer()


@lru_cache(maxsize=65536)
def _dpr_words(text: str) -> tuple[str, ...]:
    return tuple(_dpr_tokenizer().tokenize(unicodedata.normalize("NFD", text)).words(uncased=True))


def has_answer(text: str, answers: str | Iterable[str]) -> bool:
    """DPR's has-answer rule: a gold answer's token sequence occurs in the passage's (Unicode NFD, DrQA's simple
    tokenizer, lower-cased), the rule behind DPR's ``hasanswer`` flags and Pyserini's ``evaluate_dpr_retrieval``."""
    words = _dpr_words(text)
    for answer in _golds(answers):
        gold = _dpr_words(answer)
        if gold and any(words[i:i + len(gold)] == gold for i in range(len(words) - len(gold) + 1)):
            return True
    return False


def answer_recall(passage_texts: Sequence[str], answers: str | Iterable[str], k: int) -> float:
    """1.0 when a gold answer occurs in one of the first ``k`` passages (:func:`has_answer`, DPR's rule)."""
    return float(any(has_answer(t, answers) for t in passage_texts[:k]))


def support_recall(selected_pids: Iterable[str], supporting: Iterable[str]) -> float:
    """Share of the supporting passage ids among the selected ones (1.0 when there are none to find)."""
    gold = set(supporting)
    if not gold:
        return 1.0
    return len(gold & set(selected_pids)) / len(gold)
