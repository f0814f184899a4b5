"""BAR-RAG rewards in verl's custom-reward signature, with the released training values as defaults.

Point verl at them: ``reward.custom_reward_function.path=pkg://rearank.methods.barrag.reward`` and
``name=compute_selector_score`` (async: verl's reward loop awaits it) or ``name=compute_generator_score``.

**Generator** (``compute_generator_score``): 0 without a complete ``<answer>`` block; otherwise
``0.8 * (0.7 F1 + 0.3 EM) + 0.2 cite`` with SQuAD normalisation, the maximum over gold answers, and
``cite`` = 1 when the ``<think>`` block names exactly 2 distinct ``Doc [i]``, 0.5 for 1 or 3, else 0; only ids of
documents shown count (``i <= n_docs``). Ground truth: ``{"answers": [...], "n_docs": 5}`` (``rearank synth``
writes ``n_docs``; without it, or as a bare list / string of answers, citations are not bounded).

**Selector** (``compute_selector_score``):

* gate: 0 when the completion has no ``<answer>`` block with an in-range id, or repeats an id;
* the selected passages go to a reader (K = 10 samples, temperature 1.0, one request with ``n = K``); a reader
  that fails scores ``failure_score`` (-0.5) and is counted (``reader_failed`` part, :data:`READER_FAILURES`);
* p = share of the K reader answers whose generator reward is >= tau (0.8);
* boundary term ``p / 0.6`` for p <= 0.6 else ``(1 - p) / 0.4`` (peak 1 at p = 0.6, 0 at p = 0 and 1);
* relevance term ``max_rel * s / (s + rel_norm)``, s = mean of the selected passages' retrieval scores with
  negatives counted 0 (max_rel 1, rel_norm 10: the released values; rel_norm is an option because on cosine
  scores in [0, 1] the term is nearly constant);
* count penalty ``min(0.5 |n - 5|, 1)`` for n selected ids;
* total = boundary + 0.2 relevance + bonus (0) - count penalty.

Ground truth: ``{"question", "answers", "docs": [{"title", "text"}], "scores": [...]}`` in presented order
(``rearank synth --mode barrag-selector`` writes it). Decoded once per distinct string and cached.
Malformed ground truth scores 0 with ``parse_status`` 2. Neither reward raises for any completion or ground
truth; an invalid option raises ValueError (a configuration error that stops the run at its first step).
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any, NamedTuple

from rearank.measures.answers import _f1, normalize_answer
from rearank.methods.barrag.parser import parse_generation, parse_selection
from rearank.methods.barrag.prompt import generator_messages
from rearank.methods.barrag.reader import ReaderError, reader_endpoint, sample_reader
from rearank.qa.truth import truth_parser
from rearank.types import Passage

log = logging.getLogger("rearank.rag.barrag")

#: ``parse_status`` values (logged as the index: verl logs numeric parts only).
PARSE_STATUSES = ("ok", "invalid", "bad_ground_truth")
GENERATOR_PARTS = ("score", "em", "f1", "cite", "has_answer", "parse_status")
SELECTOR_PARTS = ("score", "p", "boundary", "relevance", "count_penalty", "n_selected", "reader_failed",
                  "gate", "parse_status")

#: Reader calls that failed in this process (each scored ``failure_score``); also logged per sample.
READER_FAILURES = Counter()


# ----------------------------------------------------------------------------------------------- terms


def boundary_term(p: float, peak: float = 0.6) -> float:
    """``p / peak`` up to the peak, then ``(1 - p) / (1 - peak)``: 1 at p = peak, 0 at p = 0 and p = 1."""
    return p / peak if p <= peak else (1.0 - p) / (1.0 - peak)


def count_penalty(n: int, target: int = 5, per_id: float = 0.5, cap: float = 1.0) -> float:
    """``min(per_id * |n - target|, cap)``."""
    return min(per_id * abs(n - target), cap)


def relevance_term(scores: Sequence[float], max_rel: float = 1.0, norm: float = 10.0) -> float:
    """``max_rel * s / (s + norm)`` with s the mean of ``scores``, negatives counted as 0 (0 for no scores)."""
    if not scores:
        return 0.0
    s = sum(max(0.0, x) for x in scores) / len(scores)
    return max_rel * s / (s + norm) if s + norm > 0 else 0.0


def cite_score(cited: frozenset[int]) -> float:
    """1 for exactly 2 distinct cited docs, 0.5 for 1 or 3, else 0."""
    return {2: 1.0, 1: 0.5, 3: 0.5}.get(len(cited), 0.0)


# ------------------------------------------------------------------------------------------ ground truth


class _Answers(NamedTuple):
    """Gold answers, normalised once (SQuAD style), with their token lists, and the number of documents shown."""

    normalized: tuple[str, ...]
    tokens: tuple[tuple[str, ...], ...]
    n_docs: int | None = None


class _SelectorTruth(NamedTuple):
    question: str
    answers: tuple[str, ...]
    gold: _Answers
    docs: tuple[Passage, ...]
    scores: tuple[float, ...]


def _gold(answers: Sequence[str], n_docs: int | None = None) -> _Answers:
    normalized = tuple(normalize_answer(a) for a in answers)
    return _Answers(normalized, tuple(tuple(n.split()) for n in normalized), n_docs)


def _answer_list(value: Any) -> tuple[str, ...] | None:
    if isinstance(value, dict):
        value = value.get("answers")
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(a, str) for a in value):
        return None
    return tuple(value)


def _answers_truth(value: Any) -> _Answers | None:
    answers = _answer_list(value)
    n_docs = value.get("n_docs") if isinstance(value, dict) else None
    if n_docs is not None and (type(n_docs) is not int or n_docs < 0):
        return None
    return None if answers is None else _gold(answers, n_docs)


#: The generator reward's gold answers (``{"answers": [...]}``, a list or a string), or None when malformed.
parse_answers_truth = truth_parser(_answers_truth)


def _selector_truth(value: Any) -> _SelectorTruth | None:
    if not isinstance(value, dict):
        return None
    answers, question, docs = _answer_list(value), value.get("question"), value.get("docs")
    scores = value.get("scores", [])
    if answers is None or not isinstance(question, str) or not isinstance(docs, list) or not docs:
        return None
    if not isinstance(scores, list) or len(scores) != len(docs) or not all(
        type(s) in (int, float) and math.isfinite(s) for s in scores
    ):
        return None
    passages = []
    for i, doc in enumerate(docs):
        if not isinstance(doc, dict) or not isinstance(doc.get("text"), str) or not isinstance(
            doc.get("title", ""), str
        ):
            return None
        passages.append(Passage(str(i + 1), doc.get("title", ""), doc["text"]))
    return _SelectorTruth(question, answers, _gold(answers), tuple(passages), tuple(map(float, scores)))


#: The selector reward's ground truth, or None when malformed.
parse_selector_truth = truth_parser(_selector_truth, maxsize=4096)


# ----------------------------------------------------------------------------------------------- generator


def _em_f1(answer: str, gold: _Answers) -> tuple[float, float]:
    pred = normalize_answer(answer)
    em = float(pred in gold.normalized)
    tokens = pred.split()
    return em, max((_f1(tokens, list(g)) for g in gold.tokens), default=0.0)


def generator_parts(text: object, gold: _Answers, *, f1_weight: float = 0.7, em_weight: float = 0.3,
                    answer_weight: float = 0.8, cite_weight: float = 0.2) -> dict[str, float]:
    """The generator reward and its parts for one completion against decoded gold answers."""
    parsed = parse_generation(text, gold.n_docs)
    if parsed.answer is None:
        return {"score": 0.0, "em": 0.0, "f1": 0.0, "cite": 0.0, "has_answer": 0.0,
                "parse_status": float(PARSE_STATUSES.index("invalid"))}
    em, f1 = _em_f1(parsed.answer, gold)
    cite = cite_score(parsed.cited)
    return {"score": answer_weight * (f1_weight * f1 + em_weight * em) + cite_weight * cite, "em": em, "f1": f1,
            "cite": cite, "has_answer": 1.0, "parse_status": 0.0}


def _check_numbers(**options: Any) -> None:
    for name, value in options.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"BAR-RAG reward option {name} must be a finite number; got {value!r}")


def compute_generator_score(
    data_source: object, solution_str: object, ground_truth: object, extra_info: object = None, *,
    f1_weight: float = 0.7, em_weight: float = 0.3, answer_weight: float = 0.8, cite_weight: float = 0.2,
    **kwargs: Any,
) -> dict[str, float]:
    """Score one BAR-RAG generator completion (verl ``custom_reward_function``): keys :data:`GENERATOR_PARTS`."""
    _check_numbers(f1_weight=f1_weight, em_weight=em_weight, answer_weight=answer_weight, cite_weight=cite_weight)
    gold = parse_answers_truth(ground_truth)
    if gold is None:
        return {**dict.fromkeys(GENERATOR_PARTS, 0.0), "parse_status": float(PARSE_STATUSES.index("bad_ground_truth"))}
    return generator_parts(solution_str, gold, f1_weight=f1_weight, em_weight=em_weight,
                           answer_weight=answer_weight, cite_weight=cite_weight)


# ----------------------------------------------------------------------------------------------- selector


def success_rate(reader_texts: Sequence[str], gold: _Answers, tau: float = 0.8, n_docs: int | None = None) -> float:
    """p: the share of reader completions (each shown ``n_docs`` documents) whose generator reward is >= ``tau``."""
    if not reader_texts:
        return 0.0
    gold = gold._replace(n_docs=n_docs)
    return sum(generator_parts(t, gold)["score"] >= tau for t in reader_texts) / len(reader_texts)


def selector_parts(n_selected: int, selected_scores: Sequence[float], p: float, *, max_rel: float = 1.0,
                   rel_norm: float = 10.0, relevance_weight: float = 0.2, bonus: float = 0.0,
                   target: int = 5, peak: float = 0.6) -> dict[str, float]:
    """The selector reward's parts once the reader's success rate ``p`` is known (gate passed)."""
    relevance = relevance_term(selected_scores, max_rel, rel_norm)
    penalty = count_penalty(n_selected, target)
    boundary = boundary_term(p, peak)
    return {"score": boundary + relevance_weight * relevance + bonus - penalty, "p": p, "boundary": boundary,
            "relevance": relevance, "count_penalty": penalty, "n_selected": float(n_selected),
            "reader_failed": 0.0, "gate": 1.0, "parse_status": 0.0}


async def compute_selector_score(
    data_source: object, solution_str: object, ground_truth: object, extra_info: object = None, *,
    reader_url: str | None = None, reader_model: str = "reader", k_samples: int = 10, temperature: float = 1.0,
    tau: float = 0.8, max_rel: float = 1.0, rel_norm: float = 10.0, relevance_weight: float = 0.2,
    bonus: float = 0.0, target: int = 5, failure_score: float = -0.5, reader_max_tokens: int = 1024,
    timeout_s: float = 120.0, reader_retries: int = 3, reward_router_address: str | None = None, **kwargs: Any,
) -> dict[str, float]:
    """Score one BAR-RAG selector completion, asking the reader K times (verl awaits it); keys :data:`SELECTOR_PARTS`."""
    _check_numbers(tau=tau, max_rel=max_rel, rel_norm=rel_norm, relevance_weight=relevance_weight, bonus=bonus,
                   failure_score=failure_score, temperature=temperature, timeout_s=timeout_s)
    for name, value, least in (("k_samples", k_samples, 1), ("reader_retries", reader_retries, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"BAR-RAG reward option {name} must be an integer >= {least}; got {value!r}")
    url = reader_endpoint(reader_url, reward_router_address)
    result = dict.fromkeys(SELECTOR_PARTS, 0.0)
    truth = parse_selector_truth(ground_truth)
    if truth is None:
        result["parse_status"] = float(PARSE_STATUSES.index("bad_ground_truth"))
        return result
    selection = parse_selection(solution_str, len(truth.docs))
    result["n_selected"] = float(len(selection.ids))
    if not selection.valid:
        result["parse_status"] = float(PARSE_STATUSES.index("invalid"))
        return result
    messages = generator_messages(truth.question, [truth.docs[i - 1] for i in selection.ids])
    try:
        texts = await sample_reader(url, reader_model, messages, k_samples, temperature=temperature,
                                    max_tokens=reader_max_tokens, timeout_s=timeout_s, max_retries=reader_retries)
    except ReaderError as err:
        READER_FAILURES[url] += 1
        log.warning("BAR-RAG selector reward: %s (failure %d, scored %s)", err, READER_FAILURES[url], failure_score)
        result.update(score=float(failure_score), reader_failed=1.0, gate=1.0)
        return result
    p = success_rate(texts, truth.gold, tau, n_docs=len(selection.ids))
    return selector_parts(len(selection.ids), [truth.scores[i - 1] for i in selection.ids], p, max_rel=max_rel,
                          rel_norm=rel_norm, relevance_weight=relevance_weight, bonus=bonus, target=target)
