"""LLM-as-a-judge (ARENA App. C.3): a model reads the gold answers and a response and says whether the response
matches one of them (a synonym or paraphrase counts); the verdict is 1.0 for a reply starting with "yes".

The prompt is the file ``rearank/prompts/judge.yaml`` (or any YAML prompt file with ``answer_format: judge``);
generation is greedy (temperature 0, as the paper sets GPT-4o) and cached like a reader's responses, through any
backend (``openai`` for GPT-4o or a served model, ``hf``, ``vllm``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from rearank.backends.base import AUTO, Prompt, SamplingSettings
from rearank.backends.cache import CachedBackend, ResponseCache
from rearank.methods.templates import load_prompt_file
from rearank.rag.readers import complete

_YES = re.compile(r"^\W*yes\b", re.IGNORECASE)


def verdict(reply: str) -> float:
    """1.0 when the judge's reply starts with yes (punctuation and case aside), else 0.0."""
    return float(bool(_YES.match(reply)))


class Judge:
    """Judge responses against gold answers through a backend."""

    def __init__(self, backend: Any, model: str, *, template: str = "judge", cache: ResponseCache | None = None,
                 batch_size: int = 32, max_new_tokens: int = 8, concurrency: int | str = AUTO) -> None:
        self.name = f"judge:{model}"
        self.template = template
        self.spec = load_prompt_file(template)
        if self.spec.answer_format != "judge":
            raise ValueError(f"judge prompt {template!r} has answer_format {self.spec.answer_format!r}, not judge")
        self.backend = CachedBackend(backend, model, cache)
        self.settings = SamplingSettings(max_new_tokens=max_new_tokens, temperature=0.0)
        self.batch_size, self.concurrency = batch_size, concurrency

    def prompt(self, answers: Sequence[str], response: str) -> Prompt:
        listing = "\n".join(f"- {a}" for a in answers)
        return Prompt(messages=tuple(self.spec.messages(answers=listing, response=response.strip() or "(empty)")))

    def judge(self, pairs: Sequence[tuple[Sequence[str], str]]) -> list[float]:
        """One verdict per (gold answers, response) pair."""
        replies = complete(self.backend, [self.prompt(a, r) for a, r in pairs], self.settings, self.batch_size,
                           self.concurrency)
        return [verdict(reply) for reply in replies]

    def close(self) -> None:
        self.backend.cache.close()


def make_judge(model: str, backend: str = "openai", cache: ResponseCache | None = None, **options: Any) -> Judge:
    """``--judge MODEL``: a judge through ``backend`` (options go to the backend, e.g. base_url)."""
    from rearank.backends.registry import make_backend

    return Judge(make_backend(backend, model, **options), model, cache=cache,
                 concurrency=options.get("concurrency", AUTO))
