"""A seeded noisy-oracle *reader* for tests and CPU checks: answers a question correctly with a probability that
grows with how much of its gold evidence is in the prompt.

It knows the questions of one QA file (``model`` is the file's path, read with :func:`rearank.io.qa.load_qa`).
For a prompt it finds the question (the ``Question: …`` line, else any known question the prompt contains),
measures coverage = the share of the item's supporting passages (DPR: has-answer passages) whose text starts
appear in the prompt, and answers correctly with probability ``p * coverage`` (1.0 coverage for an item without
known evidence); at temperature 0 it answers correctly exactly when coverage is 1. An unknown question gets the
wrong answer. Answers come in the BAR-RAG generator format,
``<think>Doc [1] and Doc [2] …</think><answer>…</answer>``. Draws are seeded by (``seed``, the request's seed,
the question, the copy's index among identical prompts of one batch), so ``n`` copies of a prompt are ``n``
independent samples and a rerun gives the same answers.

    python -m rearank.serve --backend qa-oracle --model ../shared/data/qa/hotpotqa/dev_distractor.first103.json
"""

from __future__ import annotations

import hashlib
import random
import re
import time
from collections import Counter
from collections.abc import Sequence

from rearank.backends.base import Generation, Prompt, SamplingSettings
from rearank.io.qa import load_qa
from rearank.rag.types import QAItem

WRONG_ANSWER = "unknown"
_QUESTION_LINE = re.compile(r"^Question:\s*(.+?)\s*$", re.MULTILINE)
_PREFIX = 60  # characters of a passage's text looked for in the prompt (prompts may cut passages short)


def _key(text: str) -> str:
    return " ".join(text.split()).lower()


class QAOracleBackend:
    """Noisy-oracle reader over the QA items of the file ``model``; ``p`` = accuracy with all evidence shown."""

    name = "qa-oracle"

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
    def coverage(item: QAItem, text: str) -> float:
        """Share of the item's evidence passages whose opening words occur in ``text`` (1.0 with no evidence known)."""
        gold = [p for p in item.passages if p.pid in item.supporting or p.has_answer]
        if not gold:
            return 1.0
        flat = " ".join(text.split())
        return sum(" ".join(p.text.split())[:_PREFIX] in flat for p in gold) / len(gold)

    def _answer(self, text: str, settings: SamplingSettings, index: int) -> str:
        item = self.find_item(text)
        if item is None:
            correct = False
        else:
            coverage = self.coverage(item, text)
            if settings.temperature == 0:
                correct = coverage >= 1.0
            else:
                digest = hashlib.sha256(f"{self.seed}|{settings.seed}|{item.qid}|{index}".encode()).digest()
                correct = random.Random(int.from_bytes(digest[:8], "big")).random() < self.p * coverage
        answer = item.answers[0] if correct and item is not None else WRONG_ANSWER
        return f"<think>Doc [1] and Doc [2] hold the facts needed.</think><answer>{answer}</answer>"
