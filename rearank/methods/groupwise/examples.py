"""Groupwise completions of known kinds for the recipe checks."""

from __future__ import annotations

from rearank.methods.groupwise.parser import format_scores, label_scores


def groupwise(truth: dict) -> dict[str, str]:
    """Scores by label, by reversed label, all alike, and broken format."""
    labels = truth["labels"]
    answer = "<reason>Scored by content.</reason>\n<answer>{}</answer>"
    return {"labels": answer.format(format_scores(label_scores(labels, 3))),
            "reversed": answer.format(format_scores(label_scores(labels[::-1], 3))),
            "flat": answer.format(format_scores([5] * len(labels))), "garbage": "I cannot score these."}
