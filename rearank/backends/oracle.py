"""An oracle backend that answers each window from the relevance judgments: the upper bound of a method.

It needs no model: it reads ``Prompt.qid`` and ``Prompt.docids`` and writes the ideal answer in the format of
the method it serves (:meth:`OracleBackend.answer_format`; by default the listwise reasoning format,
``<think>…</think><answer>[i] > [j] > …</answer>``), so the whole path (parse, apply, traces, run files) runs
exactly as with an LLM. Token counts are whitespace words of the messages and of the answer, since the oracle
has no tokenizer.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping, Sequence
from typing import Any

from rearank.backends.base import STOP, BackendBase, Generation, Prompt, SamplingSettings
from rearank.methods.listwise.answer import ideal_answer


def _listwise(labels: Sequence[int], top_grade: int) -> str:
    return ideal_answer(labels)


class OracleBackend(BackendBase):
    """Answers every prompt with the ideal answer for its passages' grades in ``qrels`` (unjudged = 0).

    ``top_grade`` is the highest grade in ``qrels`` when the backend is built (at least 1): the scale of answer
    formats that score documents (groupwise: it scores 10).
    """

    name = "oracle"
    #: It ranks by qrels, given as ``qrels=``, and takes no model.
    TAKES_MODEL = False

    def __init__(self, qrels: Mapping[str, Mapping[str, int]]) -> None:
        self.qrels = qrels
        self.answer = _listwise  # (graded labels in presented order, top grade) -> completion
        self.top_grade = max((g for judged in qrels.values() for g in judged.values()), default=1) or 1

    def answer_format(self, method: Any) -> OracleBackend:
        """This oracle answering in ``method``'s format (:meth:`~rearank.methods.base.Method.answer_text`)."""
        bound = copy.copy(self)
        bound.answer = method.answer_text
        return bound

    def generate(self, prompts: Sequence[Prompt], settings: SamplingSettings) -> list[Generation]:
        """Answer every prompt with the judged order of its passages."""
        return [self._answer(prompt) for prompt in prompts]

    def _answer(self, prompt: Prompt) -> Generation:
        started = time.perf_counter()
        judged = self.qrels.get(prompt.qid, {})
        text = self.answer([judged.get(docid, 0) for docid in prompt.docids], self.top_grade)
        prompt_words = sum(len(str(m.get("content", "")).split()) for m in prompt.messages)
        return Generation(text=text, prompt_tokens=prompt_words, completion_tokens=len(text.split()),
                          finish_reason=STOP, latency_s=time.perf_counter() - started)
