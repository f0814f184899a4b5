"""A BAR-RAG selector at inference: prompt it, parse its completion into passage ids (``--selector barrag:MODEL``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rearank.backends.base import AUTO, Backend, Prompt, SamplingSettings
from rearank.backends.cache import CachedBackend
from rearank.methods.barrag.grammar import selection_grammar
from rearank.methods.barrag.parser import parse_selection
from rearank.methods.barrag.prompt import SELECTOR_CANDIDATES, selector_messages
from rearank.rag.readers import complete
from rearank.types import Message, Passage, QAItem

#: How a selector completion parsed (counted by ``rag eval``): usable ids and no fault, or the first fault found.
STATUSES = ("ok", "no_answer", "no_valid_id", "repeated_id", "out_of_range")


def selector_candidates(item: QAItem, n: int = SELECTOR_CANDIDATES) -> tuple[Passage, ...]:
    """The passages a selector is shown: the item's first ``n`` (callers rerank/retrieve first if they wish)."""
    return item.passages[:n]


def selection_prompt(item: QAItem, n: int = SELECTOR_CANDIDATES) -> list[Message]:
    """The selector's chat for ``item`` (the same renderer synthesis uses)."""
    return selector_messages(item.question, selector_candidates(item, n))


def select(item: QAItem, generation: str, n: int = SELECTOR_CANDIDATES, fallback_k: int = 0) -> list[str]:
    """Passage ids chosen by a selector completion, in its order (repeats and out-of-range ids dropped).

    An unparseable completion selects nothing, or the first ``fallback_k`` candidates if asked.
    """
    shown = selector_candidates(item, n)
    parsed = parse_selection(generation, len(shown))
    if not parsed.ids:
        return [p.pid for p in shown[:fallback_k]]
    return [shown[i - 1].pid for i in parsed.ids]


def selection_status(item: QAItem, generation: str, n: int = SELECTOR_CANDIDATES) -> str:
    """One of :data:`STATUSES` for a selector completion."""
    parsed = parse_selection(generation, len(selector_candidates(item, n)))
    if not parsed.has_answer:
        return "no_answer"
    if not parsed.ids:
        return "no_valid_id"
    if parsed.n_repeated:
        return "repeated_id"
    return "out_of_range" if parsed.n_out_of_range else "ok"


class BarragSelector:
    """Ask a BAR-RAG selector model which passages to read; the ranking is the chosen passages, in its order.

    An unparseable completion chooses nothing (the reader then reads no passage). ``details`` keeps, per qid, the
    completion and its :func:`selection_status` for ``rag eval``'s records.
    """

    def __init__(self, backend: Backend, model: str, *, candidates: int = SELECTOR_CANDIDATES,
                 max_new_tokens: int = 1024, batch_size: int = 8, concurrency: int | str = AUTO) -> None:
        self.name = f"barrag:{model}"
        self.backend = CachedBackend(backend, model)
        self.settings = SamplingSettings(max_new_tokens=max_new_tokens)
        self.candidates, self.batch_size, self.concurrency = candidates, batch_size, concurrency
        self.details: dict[str, dict[str, str]] = {}

    @property
    def generated(self) -> int:
        return self.backend.generated

    def rank(self, items: Sequence[QAItem]) -> list[tuple[Passage, ...]]:
        prompts = [Prompt(messages=tuple(selection_prompt(item, self.candidates)), qid=item.qid,
                          docids=tuple(p.pid for p in selector_candidates(item, self.candidates)),
                          answer=selection_grammar(len(selector_candidates(item, self.candidates))))
                   for item in items]
        texts = complete(self.backend, prompts, self.settings, self.batch_size, self.concurrency)
        out = []
        for item, text in zip(items, texts):
            self.details[item.qid] = {"status": selection_status(item, text, self.candidates), "completion": text}
            out.append(tuple(item.passage(pid) for pid in select(item, text, self.candidates, fallback_k=0)))
        return out


def barrag_selector(arg: str | None, *, backend: str = "hf", candidates: int = SELECTOR_CANDIDATES,
                    max_new_tokens: int = 1024, batch_size: int = 8, **options: Any) -> BarragSelector:
    """``barrag:MODEL``: a BAR-RAG selector through a backend (options: backend, candidates, max_new_tokens,
    batch_size; the rest go to the backend), which must generate (``ROLE`` generator)."""
    from rearank.backends.base import GENERATOR
    from rearank.backends.registry import make_backend, role
    from rearank.errors import RearankError

    if role(backend) != GENERATOR:
        raise RearankError(f"barrag selector: the {backend} backend does not select passages; use hf, vllm or openai")
    return BarragSelector(make_backend(backend, arg, **options), arg or "embedded", candidates=int(candidates),
                          max_new_tokens=int(max_new_tokens), batch_size=int(batch_size),
                          concurrency=options.get("concurrency", AUTO))
