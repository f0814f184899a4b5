"""BAR-RAG selector and generator completions of known kinds for the recipe checks, with the score each reward's
definition gives them where it is fixed."""

from __future__ import annotations


def generator(truth: dict) -> dict[str, str]:
    gold = truth["answers"][0]
    return {"gold": f"<think>Doc [1] and Doc [2] say so.</think><answer>{gold}</answer>",
            "uncited": f"<answer>{gold}</answer>",
            "wrong": "<think>Doc [1] and Doc [2] say so.</think><answer>zzqx</answer>",
            "garbage": "I cannot tell."}


def generator_expected(kind: str, truth: dict) -> float | None:
    # gold: 0.8 (0.7 F1 1 + 0.3 EM 1) + 0.2 cite 1 = 1.0; uncited: 0.8; wrong: 0.2 (cite only); garbage: 0
    return {"gold": 1.0, "uncited": 0.8, "wrong": 0.2, "garbage": 0.0}[kind]


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
