"""Completions of known kinds for each stage of :mod:`recipes.checks.table` (well-formed, broken format, not a
permutation, ...), with the score each stage's reward gives them by its definition where that is fixed.

``make train-check`` scores them through verl's reward loop; ``make train-cpu`` warm-starts its tiny model on them
(:func:`warm_start_texts`); ``make train-preflight`` runs each recipe's reward on them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rearank.methods.listwise.answer import format_answer

THINK = "<think>Passages that answer the query directly come first; off-topic ones go last.</think>\n"


def _no_fixed_score(kind: str, truth: dict) -> float | None:
    return None


@dataclass(frozen=True)
class Kinds:
    """``make(decoded ground truth)`` -> {kind: completion}; ``expected(kind, truth)``: the score the reward's
    definition gives that kind (None: no fixed value); ``best``: the kind that must get a positive GRPO advantage."""

    make: Callable[[dict], dict[str, str]]
    best: str
    expected: Callable[[str, dict], float | None] = _no_fixed_score


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


def _rearank(truth: dict) -> dict[str, str]:
    from rearank.methods.listwise.reward import parse_ground_truth

    return listwise(parse_ground_truth(truth))


def _rearank_expected(kind: str, truth: dict) -> float | None:
    from rearank.methods.listwise.reward import parse_ground_truth

    return listwise_expected(kind, parse_ground_truth(truth))


def reasonrank(truth: dict) -> dict[str, str]:
    """Best (1.3), reversed (lower), not a permutation (0), broken format (-1)."""
    order = [truth["ids"].index(d) for d in truth["gold"]]
    texts = [f"<think>By the judgments.</think>\n<answer>{format_answer(o)}</answer>"
             for o in (order, order[::-1], order[:-1])]
    return dict(zip(("best", "reversed", "not_permutation", "broken"), [*texts, "I cannot rank these."]))


def groupwise(truth: dict) -> dict[str, str]:
    """Scores by label, by reversed label, all alike, and broken format."""
    from rearank.methods.groupwise.parser import format_scores, label_scores

    labels = truth["labels"]
    answer = "<reason>Scored by content.</reason>\n<answer>{}</answer>"
    return {"labels": answer.format(format_scores(label_scores(labels, 3))),
            "reversed": answer.format(format_scores(label_scores(labels[::-1], 3))),
            "flat": answer.format(format_scores([5] * len(labels))), "garbage": "I cannot score these."}


def arena(truth: dict) -> dict[str, str]:
    from rearank.methods.arena.parser import format_arena

    gold, first = truth["answers"][0], truth["supporting"][:1]
    return {"gold": format_arena(truth["supporting"], "The cited references give the answer.", gold),
            "partial": format_arena(first, "Only one reference.", "no idea"),
            "leading_word": "Answer: " + format_arena(truth["supporting"], "x", gold),
            "garbage": "I cannot tell."}


def arena_expected(kind: str, truth: dict) -> float | None:
    # gold: 1 + 1 + 1 + 10; partial: format 1 + relevance 0.5 (one of >= 2 gold ids); leading word: format 0,
    # accuracy 1, relevance 1 -> 2; garbage: 0
    partial = 1.5 if len(truth["supporting"]) > 1 else 2.0
    return {"gold": 13.0, "partial": partial, "leading_word": 2.0, "garbage": 0.0}[kind]


def generator(truth: dict) -> dict[str, str]:
    gold = truth["answers"][0]
    return {"gold": f"<think>Doc [1] and Doc [2] say so.</think><answer>{gold}</answer>",
            "uncited": f"<answer>{gold}</answer>",
            "wrong": "<think>Doc [1] and Doc [2] say so.</think><answer>zzqx</answer>",
            "garbage": "I cannot tell."}


def generator_expected(kind: str, truth: dict) -> float | None:
    # gold: 0.8 (0.7 F1 1 + 0.3 EM 1) + 0.2 cite 1 = 1.0; uncited: 0.8; wrong: 0.2 (cite only); garbage: 0
    return {"gold": 1.0, "uncited": 0.8, "wrong": 0.2, "garbage": 0.0}[kind]


def generator_fixed(truth: dict) -> dict[str, str]:
    """Fixed strings only, for the tiny model's warm start: a 3.2M-parameter model cannot copy a gold answer, and
    verl's transformers rollout samples at temperature 1 from the whole vocabulary, so warm-starting on gold copies
    left every sampled answer unparseable (0 of 48 rollouts rewarded in 3 steps). These four parse or fail alike
    for every item yet score 0.2 (two docs cited, wrong answer), 0.8 or 1.0 (yes/no, right on HotpotQA's
    comparison questions) or 0 (no answer)."""
    return {"wrong": "<think>Doc [1] and Doc [2] say so.</think><answer>zzqx</answer>",
            "yes": "<think>Doc [1] and Doc [2] say so.</think><answer>yes</answer>",
            "no": "<answer>no</answer>", "garbage": "I cannot tell."}


def selector(truth: dict) -> dict[str, str]:
    n = len(truth["docs"])
    support = truth["supporting"]
    others = [i for i in range(1, n + 1) if i not in support]
    chosen = (support + others)[:5]
    fmt = ", ".join
    return {"supporting": f"<think>These hold the facts.</think><answer> {fmt(f'[{i}]' for i in chosen)} </answer>",
            "distractors": f"<think>Guess.</think><answer> {fmt(f'[{i}]' for i in others[:5])} </answer>",
            "repeat": f"<think>x</think><answer> [{chosen[0]}], [{chosen[0]}] </answer>",
            "garbage": "I cannot tell."}


def selector_expected(kind: str, truth: dict) -> float | None:
    # repeat and garbage fail the gate: 0; the others depend on the reader's draws (checked against a direct call)
    return {"repeat": 0.0, "garbage": 0.0}.get(kind)


#: Stage name -> its kinds.
KINDS = {
    "rearank": Kinds(_rearank, "ideal", _rearank_expected),
    "reasonrank": Kinds(reasonrank, "best"),
    "grouprank": Kinds(groupwise, "labels"),
    "barrag_selector": Kinds(selector, "supporting", selector_expected),
    "barrag_generator": Kinds(generator, "gold", generator_expected),
    "arena": Kinds(arena, "gold", arena_expected),
}
#: What the tiny model of ``make train-cpu`` is warm-started on, where it differs from :data:`KINDS`.
WARM_START = {"barrag_generator": generator_fixed}


def warm_start_texts(stage: str, ground_truth: str) -> list[str]:
    """The completions ``make train-cpu`` warm-starts a stage's tiny model on, for one row's ground truth."""
    import json

    truth = json.loads(ground_truth)
    return list(WARM_START.get(stage, KINDS[stage].make)(truth).values())
