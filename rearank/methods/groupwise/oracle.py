"""The groupwise oracle answer: every document of a group scored from its relevance grade."""

from __future__ import annotations

from collections.abc import Sequence

from rearank.methods.groupwise.parser import format_scores, label_scores


def oracle_answer(labels: Sequence[int], top_grade: int, reasoning: bool = True) -> str:
    """The groupwise completion for a group whose documents have these graded ``labels``; ``top_grade`` (the
    highest grade of the judgments, at least 1) scores 10 (:func:`rearank.methods.groupwise.parser.label_scores`).
    ``reasoning=False``: the ``<answer>`` alone."""
    answer = f"<answer>{format_scores(label_scores(labels, max(top_grade, 1)))}</answer>"
    if not reasoning:
        return answer
    grades = ", ".join(f"[{i + 1}]={label}" for i, label in enumerate(labels))
    return f"<reason>Relevance judgments: {grades}.</reason>\n{answer}"
