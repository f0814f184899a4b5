"""Readers: answer a question from a list of passages, through any backend (hf, vllm, openai) or from the gold answers.

- :class:`LLMReader` renders a reader template -- a RAG prompt file named in :mod:`rearank.methods.templates`
  (``plain``, one user turn with numbered passages; ``rrpo``, RRPO's layout: a system turn, a one-shot example,
  one user turn per passage, then the question; ``barrag_generator`` and ``arena``, the BAR-RAG and ARENA generator
  prompts; a plugin's) or the path of a YAML prompt file -- with the renderer of the ``reader`` card its
  ``answer_format`` names (:mod:`rearank.methods.card`), reads the answer with that card's parser, sends the prompts
  of many questions per backend call, and caches greedy responses (:mod:`rearank.backends.cache`), so a temperature-0
  answer is never generated twice.
- :class:`GoldReader` answers the first gold answer, written in the template's format (the card's oracle answer),
  when its context holds the evidence (a supporting or
  ``has_answer`` passage; ``require="all"``: every supporting passage; ``require="share"``: right with
  probability = the share of the evidence shown), else :data:`WRONG_ANSWER`. The rule is
  :func:`rearank.qa.oracle.oracle_answer`, which the served ``qa-oracle`` backend uses too.
- :class:`NoisyGoldReader` is the gold reader made right with probability ``p``; the draw is a hash of (seed, qid,
  passage ids), so the same context always gets the same answer (like greedy decoding).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rearank.backends.base import AUTO, GENERATOR, SCORER, Backend, Generation, Prompt, SamplingSettings
from rearank.backends.cache import CachedBackend, ResponseCache
from rearank.engine import Engine
from rearank.errors import RearankError
from rearank.methods.card import CARDS, READER, Card, cards
from rearank.methods.templates import RAG, load_prompt_file, names
from rearank.prompts import truncate_texts
from rearank.qa.oracle import REQUIRES, WRONG_ANSWER, coin, oracle_answer
from rearank.types import Passage, QAItem

#: Short answers: enough for an entity, a date or yes/no.
READER_MAX_NEW_TOKENS = 32

#: Tokens kept of each passage (words when there is no tokenizer).
MAX_PASSAGE_TOKENS = 300


@dataclass(frozen=True)
class ReaderOutput:
    """The reader's raw response and the short answer extracted from it (what EM/F1 score)."""

    response: str
    answer: str
    failed: bool = False  # the backend gave no answer (server error, timeout, malformed reply): scored as wrong
    error: str = ""  # why it failed (the backend's one line)


class Reader(Protocol):
    """Anything that answers a batch of (item, context passages) pairs, in order."""

    name: str

    def read(self, batch: Sequence[tuple[QAItem, Sequence[Passage]]]) -> list[ReaderOutput]: ...


def reader_card(template: str) -> Card:
    """The ``reader`` card whose format a ``--template`` value (a name or a path) is written in; errors say what is
    wrong."""
    fmt = load_prompt_file(template).answer_format
    found = CARDS.get(fmt)
    if found is None or found.kind != READER:
        formats = {c.name for c in cards(READER)}
        readers = [name for name in names(RAG) if load_prompt_file(name).answer_format in formats]
        raise RearankError(f"--template {template!r} is a {fmt} prompt, not a reader's; choose one of: "
                           f"{', '.join(readers)}, or the path of a YAML prompt file")
    return found


def _shown(passages: Sequence[Passage], texts: Sequence[str]) -> list[Passage]:
    return [Passage(p.pid, p.title, t, p.has_answer) for p, t in zip(passages, texts)]


# --- readers ---------------------------------------------------------------------------------------------------


class LLMReader:
    """Answer through a backend with a template; ``batch_size`` prompts (from as many questions) per call on a batch
    backend, ``concurrency`` in flight on a concurrent one."""

    def __init__(self, backend: Backend, model: str, template: str = "plain", settings: SamplingSettings | None = None,
                 cache: ResponseCache | None = None, batch_size: int = 32,
                 max_passage_tokens: int | None = MAX_PASSAGE_TOKENS, concurrency: int | str = AUTO) -> None:
        self.card = reader_card(template)
        if batch_size < 1:
            raise RearankError(f"reader batch_size must be at least 1, got {batch_size}")
        self.name = f"{getattr(backend, 'name', 'llm')}:{model}"
        self.backend = CachedBackend(backend, model, cache)
        self.template = template
        self.settings = settings or SamplingSettings(max_new_tokens=READER_MAX_NEW_TOKENS)
        self.batch_size, self.concurrency = batch_size, concurrency
        self.max_passage_tokens = max_passage_tokens
        self.tokenizer = getattr(backend, "tokenizer", None)

    @property
    def generated(self) -> int:
        """Prompts sent to the backend so far (cache hits excluded)."""
        return self.backend.generated

    def close(self) -> None:
        """Close the response cache file."""
        self.backend.cache.close()

    def prompt(self, item: QAItem, passages: Sequence[Passage]) -> Prompt:
        texts = truncate_texts([" ".join(p.text.split()) for p in passages], self.max_passage_tokens, self.tokenizer)
        messages = self.card.render(load_prompt_file(self.template), item.question, _shown(passages, texts))
        answer = self.card.grammar(len(passages)) if self.card.grammar else None  # what -O constrain=answer follows
        return Prompt(messages=tuple(messages), qid=item.qid, docids=tuple(p.pid for p in passages), answer=answer)

    def read(self, batch: Sequence[tuple[QAItem, Sequence[Passage]]]) -> list[ReaderOutput]:
        """Answers in order, ``batch_size`` prompts a backend call (greedy ones cached); a failed one is marked."""
        generations = generate(self.backend, [self.prompt(item, passages) for item, passages in batch],
                               self.settings, self.batch_size, self.concurrency)
        parse = self.card.parse
        return [ReaderOutput("", parse(""), failed=True, error=g.error) if g.finish_reason == "error"
                else ReaderOutput(g.text, parse(g.text)) for g in generations]


def generate(backend: Backend, prompts: Sequence[Prompt], settings: SamplingSettings, batch_size: int,
             concurrency: int | str = AUTO) -> list[Generation]:
    """Generate ``prompts`` through ``backend`` by the engine's schedule (:meth:`rearank.engine.Engine.generate`):
    ``batch_size`` a call on a batch backend, ``concurrency`` in flight on a server."""
    return Engine(backend, settings=settings, batch_size=batch_size, concurrency=concurrency).generate(prompts)


def complete(backend: Backend, prompts: Sequence[Prompt], settings: SamplingSettings, batch_size: int,
             concurrency: int | str = AUTO) -> list[str]:
    """Generate ``prompts`` through ``backend`` (as :func:`generate`); a failed generation is ``""``."""
    return ["" if g.finish_reason == "error" else g.text
            for g in generate(backend, prompts, settings, batch_size, concurrency)]


class GoldReader:
    """The gold answer when the context holds the evidence, else a fixed wrong one (:mod:`rearank.qa.oracle`)."""

    name = "gold"

    def __init__(self, require: str = "any", wrong_answer: str = WRONG_ANSWER, template: str = "plain") -> None:
        if require not in REQUIRES:
            raise RearankError(f"{self.name} reader: require must be one of {', '.join(REQUIRES)}, got {require!r}")
        self.require = require
        self.wrong_answer = wrong_answer
        self.card = reader_card(template)
        self.generated = 0

    def answer(self, item: QAItem, passages: Sequence[Passage]) -> str:
        """The oracle rule with p = 1 and no draw."""
        return oracle_answer(item, (p.pid for p in passages), require=self.require, wrong_answer=self.wrong_answer)

    def read(self, batch: Sequence[tuple[QAItem, Sequence[Passage]]]) -> list[ReaderOutput]:
        self.generated += len(batch)
        out = []
        for item, passages in batch:
            supporting = [i for i, p in enumerate(passages, 1) if p.pid in item.supporting or p.has_answer]
            response = self.card.oracle(self.answer(item, passages), supporting)
            out.append(ReaderOutput(response, self.card.parse(response)))
        return out


class NoisyGoldReader(GoldReader):
    """The gold reader right with probability ``p``; the draw is seeded by (seed, qid, passage ids), per context."""

    name = "noisy-gold"

    def __init__(self, p: float = 0.8, seed: int = 0, require: str = "any", wrong_answer: str = WRONG_ANSWER,
                 template: str = "plain") -> None:
        if not 0.0 <= p <= 1.0:
            raise RearankError(f"{self.name} reader: p must be in [0, 1], got {p}")
        super().__init__(require, wrong_answer, template)
        self.p, self.seed = p, seed

    def answer(self, item: QAItem, passages: Sequence[Passage]) -> str:
        pids = [p.pid for p in passages]
        return oracle_answer(item, pids, require=self.require, p=self.p, draw=coin(self.seed, item.qid, *pids),
                             wrong_answer=self.wrong_answer)


class SpreadReader:
    """Several readers (e.g. one per OpenAI-compatible server) sharing each batch: contiguous parts, read at once."""

    def __init__(self, readers: Sequence[Reader]) -> None:
        if not readers:
            raise RearankError("a spread reader needs at least one reader")
        self.readers = list(readers)
        self.name = "+".join(r.name for r in self.readers)

    @property
    def generated(self) -> int:
        return sum(getattr(r, "generated", 0) for r in self.readers)

    def close(self) -> None:
        for r in self.readers:
            if hasattr(r, "close"):
                r.close()

    def read(self, batch: Sequence[tuple[QAItem, Sequence[Passage]]]) -> list[ReaderOutput]:
        from concurrent.futures import ThreadPoolExecutor

        n = len(self.readers)
        size, extra = divmod(len(batch), n)
        parts, start = [], 0
        for i in range(n):
            end = start + size + (1 if i < extra else 0)
            parts.append(batch[start:end])
            start = end
        with ThreadPoolExecutor(max_workers=n) as pool:
            results = list(pool.map(lambda pair: pair[0].read(pair[1]) if pair[1] else [],
                                    zip(self.readers, parts)))
        return [output for part in results for output in part]


#: Readers that answer by a rule from the gold answers, for checks; every other reader is a model behind a registered
#: backend.
RULE_READERS = (GoldReader.name, NoisyGoldReader.name)


def reader_names() -> list[str]:
    """The rule readers, then every backend of a model (``ROLE`` generator or scorer; entry points included): not
    those that answer from judgments (the reranking ``oracle``) or that serve readers (``qa-oracle``)."""
    from rearank.backends.registry import backends

    return [*RULE_READERS, *backends(GENERATOR, SCORER)]


def _spreads(name: str) -> bool:
    """Whether backend ``name`` reads from a server named by ``base_url`` (its declared ``OPTIONS``), so a list of
    URLs spreads a reader over servers."""
    from rearank.backends.registry import declared

    return any(option.name == "base_url" for option in declared(name, "OPTIONS"))


def make_reader(name: str, model: str | None = None, *, template: str = "plain",
                settings: SamplingSettings | None = None, cache: ResponseCache | None = None,
                batch_size: int = 32, max_passage_tokens: int | None = MAX_PASSAGE_TOKENS,
                **options: Any) -> Reader:
    """Build a reader: ``gold`` / ``noisy-gold`` (``options``: require, p, seed) or an LLM through the backend
    ``name`` (hf, vllm, vllm-async, openai, or a plugin's; :func:`reader_names`) for ``model`` (``options`` go to
    the backend). A backend of a server (``openai``) with a list of ``base_url``s spreads each batch over those
    servers (:class:`SpreadReader`), one response cache for all."""
    rules = {reader.name: reader for reader in (GoldReader, NoisyGoldReader)}
    if name in rules:
        return rules[name](**options, template=template)
    if name not in reader_names():
        raise RearankError(f"unknown reader {name!r}; choose one of {', '.join(reader_names())}")
    from rearank.backends.registry import make_backend

    urls = options.get("base_url")
    if isinstance(urls, (list, tuple)):
        if not _spreads(name) or not urls:
            served = " or ".join(n for n in reader_names()[len(RULE_READERS):] if _spreads(n))
            raise RearankError(f"a list of base_url needs the {served} reader and at least one URL")
        shared = cache if cache is not None else ResponseCache()
        return SpreadReader([make_reader(name, model, template=template, settings=settings, cache=shared,
                                         batch_size=batch_size, max_passage_tokens=max_passage_tokens,
                                         **{**options, "base_url": url}) for url in urls])
    backend = make_backend(name, model, **options)
    return LLMReader(backend, model or "embedded", template=template, settings=settings, cache=cache,
                     batch_size=batch_size, max_passage_tokens=max_passage_tokens,
                     concurrency=options.get("concurrency", AUTO))
