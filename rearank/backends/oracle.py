"""An oracle backend that ranks each window by the relevance judgments: the upper bound of a window schedule.

It needs no model: it reads ``Prompt.qid`` and ``Prompt.docids`` and answers in the reasoning format
(``<think>…</think><answer>[i] > [j] > …</answer>``), so the whole driver path (parse, apply, traces,
run files) runs exactly as with an LLM. Token counts are whitespace words of the messages and of the
answer, since the oracle has no tokenizer.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from rearank.answer import format_answer
from rearank.backends.base import Generation, Prompt, SamplingSettings


class OracleBackend:
    """Orders each window by graded relevance from ``qrels`` (unjudged = 0); ties keep the presented order."""

    name = "oracle"

    def __init__(self, qrels: Mapping[str, Mapping[str, int]]) -> None:
        self.qrels = qrels

    def generate(self, prompts: Sequence[Prompt], settings: SamplingSettings) -> list[Generation]:
        """Answer every prompt with the judged order of its window."""
        return [self._answer(prompt) for prompt in prompts]

    def answer_text(self, labels: Sequence[int]) -> str:
        """The completion for a window whose passages have these graded ``labels`` (presented order)."""
        order = sorted(range(len(labels)), key=lambda i: -labels[i])  # stable: ties keep presented order
        grades = ", ".join(f"[{i + 1}]={label}" for i, label in enumerate(labels))
        return f"<think>Relevance judgments: {grades}.</think>\n<answer>{format_answer(order)}</answer>"

    def _answer(self, prompt: Prompt) -> Generation:
        started = time.perf_counter()
        judged = self.qrels.get(prompt.qid, {})
        text = self.answer_text([judged.get(docid, 0) for docid in prompt.docids])
        prompt_words = sum(len(str(m.get("content", "")).split()) for m in prompt.messages)
        return Generation(text=text, prompt_tokens=prompt_words, completion_tokens=len(text.split()),
                          finish_reason="stop", latency_s=time.perf_counter() - started)
