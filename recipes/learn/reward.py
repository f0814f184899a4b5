"""The reward of ``make train-learn``: one action, the id of the best passage, priced in full.

``score`` = 1 when the answer names exactly one in-range id and that passage has the highest grade of the window, 0
when it names one in-range id of a lower grade, -1 otherwise (no id, several ids, an id out of range, an unclosed
``<answer>``). In range means ``1..N`` for a window of N passages, N read from the ground truth's labels (so
``[3]`` is invalid in a ``--set-size 2`` window). The answer is read by the listwise parser
(:func:`rearank.methods.listwise.answer.parse_answer`) and the ground truth by the listwise reward's reader, so
rows in the shape ``rearank synth`` writes score unchanged.
The recipe's own reward (normalized nDCG + format, ``rearank.methods.listwise.reward``) repairs malformed answers
and prices format at 0.1, which let a first learning run drift into unclosed id chains
(docs/training.md, "make train-learn"); this variant leaves the policy nothing to gain from a malformed answer.
"""

from __future__ import annotations

from typing import Any

from rearank.measures.ndcg import dcg_at_k
from rearank.methods.listwise.answer import parse_answer
from rearank.methods.truth import K, parse_ground_truth


def compute_score(data_source: object, solution_str: object, ground_truth: object, extra_info: object = None,
                  **verl_extras: Any) -> dict[str, float]:
    """verl ``custom_reward_function``: ``score`` plus ``valid`` (one in-range id), ``top1`` (it is a best
    passage), ``first`` (its 0-based position, -1 when not valid), ``relevant`` (0-based position of the first best
    passage) and ``ndcg`` (nDCG@10 of the parser's repaired permutation). ``verl_extras``: unused."""
    labels = parse_ground_truth(ground_truth)
    if not labels:
        raise ValueError(f"ground truth {ground_truth!r}: expected {{'labels': [grade, ...]}}")
    parsed = parse_answer(solution_str, len(labels))
    valid = parsed.n_ids == 1 and parsed.n_out_of_range == 0 and parsed.status != "truncated"
    best = max(labels)
    first = parsed.permutation[0] if valid else -1
    top1 = valid and labels[first] == best
    ideal = dcg_at_k(sorted(labels, reverse=True), K)
    return {"score": 1.0 if top1 else (0.0 if valid else -1.0), "valid": float(valid), "top1": float(top1),
            "first": float(first), "relevant": float(labels.index(best)),
            "ndcg": dcg_at_k([labels[i] for i in parsed.permutation[:K]], K) / ideal if ideal > 0 else 0.0}
