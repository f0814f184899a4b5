"""An oracle backend that answers each window from the relevance judgments: the upper bound of a method.

It needs no model: it reads ``Prompt.qid`` and ``Prompt.docids`` and writes the ideal answer in the format of
the method it serves, which binds it (:meth:`OracleBackend.answer_format`; the engine does), so the whole path
(parse, apply, traces, run files) runs exactly as with an LLM. Token counts are whitespace words of the messages
and of the answer, since the oracle has no tokenizer.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rearank.backends.base import JUDGE, STOP, BackendBase, Generation, Prompt, SamplingSettings
from rearank.errors import RearankError


class OracleBackend(BackendBase):
    """Answers every prompt with the ideal answer for its passages' grades in ``qrels`` (unjudged = 0).

    ``top_grade`` is the highest grade in ``qrels`` when the backend is built (at least 1): the scale of answer
    formats that score documents (groupwise: it scores 10).
    """

    name = "oracle"
    #: It ranks by qrels, given as ``qrels=``, and takes no model.
    ROLE = JUDGE
    NEEDS_QRELS = True
    TAKES_MODEL = False

    def __init__(self, qrels: Mapping[str, Mapping[str, int]]) -> None:
        self.qrels = qrels
        #: (graded labels in presented order, top grade) -> completion: the bound method's ``answer_text``
        self.answer: Callable[[Sequence[int], int], str] | None = None
        self.top_grade = max((g for judged in qrels.values() for g in judged.values()), default=1) or 1

    def answer_format(self, method: Any) -> OracleBackend:
        """This oracle answering in ``method``'s format (:meth:`~rearank.methods.base.Method.answer_text`)."""
        bound = copy.copy(self)
        bound.answer = method.answer_text
        return bound

    def generate(self, prompts: Sequence[Prompt], settings: SamplingSettings) -> list[Generation]:
        """Answer every prompt with the judged order of its passages, in the bound method's format."""
        if self.answer is None:
            raise RearankError("the oracle backend answers in a method's format: bind it first with "
                               "backend.answer_format(method) (the engine and Reranker do)")
        return [self._answer(prompt) for prompt in prompts]

    def _answer(self, prompt: Prompt) -> Generation:
        started = time.perf_counter()
        judged = self.qrels.get(prompt.qid, {})
        text = self.answer([judged.get(docid, 0) for docid in prompt.docids], self.top_grade)
        prompt_words = sum(len(str(m.get("content", "")).split()) for m in prompt.messages)
        return Generation(text=text, prompt_tokens=prompt_words, completion_tokens=len(text.split()),
                          finish_reason=STOP, latency_s=time.perf_counter() - started)
