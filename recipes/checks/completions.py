"""Completions of known kinds for each stage of :mod:`recipes.checks.table`: the example completions of the stage's
method card (:attr:`rearank.methods.card.Card.examples`: well-formed, broken format, not a permutation, ...), with the
score the reward gives them by its definition where that is fixed.

``make train-check`` scores them through verl's reward loop; ``make train-cpu`` warm-starts its tiny model on them
(:func:`warm_start_texts`); ``make train-preflight`` runs each recipe's reward on them.
"""

from __future__ import annotations

import json

from rearank.errors import RearankError
from rearank.methods.card import Examples, card
from recipes.checks.table import STAGES


def examples(stage: str) -> Examples:
    """The example completions of ``stage``'s card (a stage of :data:`recipes.checks.table.STAGES`)."""
    found = card(STAGES[stage].card).examples
    if found is None:
        raise RearankError(f"card {STAGES[stage].card!r} of stage {stage!r} declares no example completions")
    return found


def generator_fixed(truth: dict) -> dict[str, str]:
    """Fixed strings only, for the tiny model's warm start: a 3.2M-parameter model cannot copy a gold answer, and
    verl's transformers rollout samples at temperature 1 from the whole vocabulary, so warm-starting on gold copies
    left every sampled answer unparseable (0 of 48 rollouts rewarded in 3 steps). These four parse or fail alike
    for every item yet score 0.2 (two docs cited, wrong answer), 0.8 or 1.0 (yes/no, right on HotpotQA's
    comparison questions) or 0 (no answer)."""
    return {"wrong": "<think>Doc [1] and Doc [2] say so.</think><answer>zzqx</answer>",
            "yes": "<think>Doc [1] and Doc [2] say so.</think><answer>yes</answer>",
            "no": "<answer>no</answer>", "garbage": "I cannot tell."}


#: What the tiny model of ``make train-cpu`` is warm-started on, where it differs from the card's examples.
WARM_START = {"barrag_generator": generator_fixed}


def warm_start_texts(stage: str, ground_truth: str) -> list[str]:
    """The completions ``make train-cpu`` warm-starts a stage's tiny model on, for one row's ground truth."""
    truth = json.loads(ground_truth)
    return list(WARM_START.get(stage, examples(stage).make)(truth).values())
