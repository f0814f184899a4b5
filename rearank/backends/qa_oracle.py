"""A seeded noisy-oracle *reader* for tests and CPU checks: answers a question correctly with a probability that
grows with how much of its gold evidence is in the prompt.

It knows the questions of one QA file (``model`` is the file's path, read with :func:`rearank.io.qa.load_qa`).
For a prompt it finds the question (the ``Question: …`` line, else any known question the prompt contains),
finds the item's passages whose text starts appear in the prompt, and answers by the rule every QA oracle shares
(:func:`rearank.qa.oracle.oracle_answer`): right with probability ``p * share`` of the gold evidence shown
(``require="share"``); at temperature 0, right exactly when every supporting passage is shown (``require="all"``).
An unknown question gets the wrong answer. Answers come in the BAR-RAG generator format,
``<think>Doc [1] and Doc [2] …</think><answer>…</answer>``. Draws are seeded by (``seed``, the request's seed,
the question, the copy's index among identical prompts of one batch), so ``n`` copies of a prompt are ``n``
independent samples and a rerun gives the same answers.

    python -m rearank.backends.chat_server --backend qa-oracle \
        --model ../shared/data/qa/hotpotqa/dev_distractor.first103.json
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Sequence

from rearank.backends.base import READER, BackendBase, Generation, Prompt, SamplingSettings
from rearank.io.qa import load_qa
from rearank.qa.oracle import WRONG_ANSWER, coin, oracle_answer
from rearank.types import QAItem

__all__ = ["WRONG_ANSWER", "QAOracleBackend"]
_QUESTION_LINE = re.compile(r"^Question:\s*(.+?)\s*$", re.MULTILINE)
_PREFIX = 60  # characters of a passage's text looked for in the prompt (prompts may cut passages short)


def _key(text: str) -> str:
    return " ".join(text.split()).lower()


class QAOracleBackend(BackendBase):
    """Noisy-oracle reader over the QA items of the file ``model``; ``p`` = accuracy with all evidence shown."""

    name = "qa-oracle"
    ROLE = READER

    def __init__(self, model: str, p: float = 0.7, seed: int = 0) -> None:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"p must be in [0, 1]; got {p}")
        self.items = {_key(item.question): item for item in load_qa(model)}
        self.p, self.seed = p, seed

    def generate(self, prompts: Sequence[Prompt], settings: SamplingSettings) -> list[Generation]:
        """One answer per prompt; the j-th copy of a prompt in the batch draws its own sample."""
        copies: Counter[str] = Counter()
        out = []
        for prompt in prompts:
            started = time.perf_counter()
            text = "\n".join(str(m.get("content", "")) for m in prompt.messages)
            index = copies[text]
            copies[text] += 1
            answer = self._answer(text, settings, index)
            out.append(Generation(text=answer, prompt_tokens=len(text.split()), completion_tokens=len(answer.split()),
                                  finish_reason="stop", latency_s=time.perf_counter() - started))
        return out

    def find_item(self, text: str) -> QAItem | None:
        """The known item whose question the prompt asks."""
        for match in _QUESTION_LINE.finditer(text):
            item = self.items.get(_key(match.group(1)))
            if item is not None:
                return item
        flat = _key(text)
        return next((item for key, item in self.items.items() if key in flat), None)

    @staticmethod
    def shown(item: QAItem, text: str) -> list[str]:
        """Ids of the item's passages whose opening words occur in ``text``."""
        flat = " ".join(text.split())
        return [p.pid for p in item.passages if " ".join(p.text.split())[:_PREFIX] in flat]

    def _answer(self, text: str, settings: SamplingSettings, index: int) -> str:
        item = self.find_item(text)
        if item is None:
            answer = WRONG_ANSWER
        elif settings.temperature == 0:
            answer = oracle_answer(item, self.shown(item, text), require="all")
        else:
            answer = oracle_answer(item, self.shown(item, text), require="share", p=self.p,
                                   draw=coin(self.seed, settings.seed, item.qid, index))
        return f"<think>Doc [1] and Doc [2] hold the facts needed.</think><answer>{answer}</answer>"
