"""A groupwise oracle backend: scores every document of a group from the relevance judgments."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rearank.backends.oracle import OracleBackend
from rearank.grouprank.parser import format_scores, label_scores


class GroupOracleBackend(OracleBackend):
    """Answers each group with scores from ``qrels`` (unjudged = 0), in the groupwise format.

    ``max_label`` (default: the highest grade in ``qrels``, at least 1) maps to score 10
    (:func:`rearank.grouprank.parser.label_scores`). Everything but the answer text is the listwise
    :class:`~rearank.backends.oracle.OracleBackend`'s.
    """

    name = "grouprank-oracle"

    def __init__(self, qrels: Mapping[str, Mapping[str, int]], max_label: float | None = None) -> None:
        super().__init__(qrels)
        top = max((rel for judged in qrels.values() for rel in judged.values()), default=1)
        self.max_label = max_label if max_label is not None else max(top, 1)

    def answer_text(self, labels: Sequence[int]) -> str:
        """The groupwise completion for a group whose documents have these graded ``labels``."""
        grades = ", ".join(f"[{i + 1}]={label}" for i, label in enumerate(labels))
        answer = format_scores(label_scores(labels, self.max_label))
        return f"<reason>Relevance judgments: {grades}.</reason>\n<answer>{answer}</answer>"
