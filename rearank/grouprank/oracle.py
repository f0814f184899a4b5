"""A groupwise oracle backend: scores every document of a group from the relevance judgments."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from rearank.backends.base import Generation, Prompt, SamplingSettings
from rearank.grouprank.parser import format_scores, label_scores


class GroupOracleBackend:
    """Answers each group with scores from ``qrels`` (unjudged = 0), in the groupwise format.

    ``max_label`` (default: the highest grade in ``qrels``, at least 1) maps to score 10
    (:func:`rearank.grouprank.parser.label_scores`). Token counts are whitespace words.
    """

    name = "grouprank-oracle"

    def __init__(self, qrels: Mapping[str, Mapping[str, int]], max_label: float | None = None) -> None:
        self.qrels = qrels
        top = max((rel for judged in qrels.values() for rel in judged.values()), default=1)
        self.max_label = max_label if max_label is not None else max(top, 1)

    def generate(self, prompts: Sequence[Prompt], settings: SamplingSettings) -> list[Generation]:
        """Answer every prompt with the judged scores of its group."""
        return [self._answer(prompt) for prompt in prompts]

    def _answer(self, prompt: Prompt) -> Generation:
        started = time.perf_counter()
        judged = self.qrels.get(prompt.qid, {})
        labels = [judged.get(docid, 0) for docid in prompt.docids]
        grades = ", ".join(f"[{i + 1}]={label}" for i, label in enumerate(labels))
        answer = format_scores(label_scores(labels, self.max_label))
        text = f"<reason>Relevance judgments: {grades}.</reason>\n<answer>{answer}</answer>"
        prompt_words = sum(len(str(m.get("content", "")).split()) for m in prompt.messages)
        return Generation(text=text, prompt_tokens=prompt_words, completion_tokens=len(text.split()),
                          finish_reason="stop", latency_s=time.perf_counter() - started)
