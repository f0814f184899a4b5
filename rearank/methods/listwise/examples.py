"""Listwise and ReasonRank completions of known kinds (the recipe checks score them through verl's reward loop),
with the score the reward's definition gives them where it is fixed."""

from __future__ import annotations

from collections.abc import Sequence

from rearank.methods.listwise.answer import format_answer

THINK = "<think>Passages that answer the query directly come first; off-topic ones go last.</think>\n"


def listwise(labels: Sequence[float]) -> dict[str, str]:
    """Ideal, presented and reversed orders and garbage for a set with these labels (presented order)."""
    n = len(labels)
    ideal = sorted(range(n), key=lambda i: -labels[i])
    answer = "<answer>{}</answer>"
    return {
        "ideal": THINK + answer.format(format_answer(ideal)),
        "presented": THINK + answer.format(format_answer(range(n))),
        "reversed": THINK + answer.format(format_answer(reversed(range(n)))),
        "garbage": "I am not sure which passage is relevant to this question.",
    }


def listwise_expected(kind: str, labels: Sequence[float]) -> float | None:
    """The score the listwise reward's definition gives a kind (None: no fixed value, e.g. reversed)."""
    presented_is_ideal = list(labels) == sorted(labels, reverse=True)
    return {"ideal": 1.0, "presented": 1.0 if presented_is_ideal else 0.2, "garbage": 0.0}.get(kind)


def from_truth(truth: dict) -> dict[str, str]:
    """:func:`listwise` of a row's decoded ground truth."""
    from rearank.methods.truth import parse_ground_truth

    return listwise(parse_ground_truth(truth))


def expected_from_truth(kind: str, truth: dict) -> float | None:
    """:func:`listwise_expected` of a row's decoded ground truth."""
    from rearank.methods.truth import parse_ground_truth

    return listwise_expected(kind, parse_ground_truth(truth))


def reasonrank(truth: dict) -> dict[str, str]:
    """Best (1.3), reversed (lower), not a permutation (0), broken format (-1)."""
    order = [truth["ids"].index(d) for d in truth["gold"]]
    texts = [f"<think>By the judgments.</think>\n<answer>{format_answer(o)}</answer>"
             for o in (order, order[::-1], order[:-1])]
    return dict(zip(("best", "reversed", "not_permutation", "broken"), [*texts, "I cannot rank these."]))
