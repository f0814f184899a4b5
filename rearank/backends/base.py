"""The one backend protocol: a batch of chat conversations and sampling settings in, texts out."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from rearank.grammar import AnswerGrammar
from rearank.types import Message

if TYPE_CHECKING:
    from rearank.backends.options import Option

#: The chat-template variable of a thinking switch (Qwen3 and others): ``-O enable_thinking=false``.
THINKING_SWITCH = "enable_thinking"


def has_thinking_switch(chat_template: object) -> bool:
    """Whether a chat template (text, or a dict of named templates) reads ``enable_thinking``."""
    texts = chat_template.values() if isinstance(chat_template, dict) else [chat_template]
    return any(isinstance(t, str) and THINKING_SWITCH in t for t in texts)


def thinking_kwargs(enable_thinking: bool | None) -> dict[str, Any]:
    """Chat-template keyword arguments for the thinking switch (none when it is not set)."""
    return {} if enable_thinking is None else {THINKING_SWITCH: bool(enable_thinking)}


@dataclass(frozen=True)
class SamplingSettings:
    """How to generate. ``temperature == 0`` means greedy."""

    max_new_tokens: int = 2048
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0


@dataclass(frozen=True)
class Prompt:
    """One window to generate for: the chat messages, plus what a non-LLM backend may need.

    ``qid`` and ``docids`` (in presented order) let the oracle backend judge the window; ``pair`` (a pointwise
    prompt's query, passage title and passage text) is what a scorer backend scores; LLM backends use ``messages``
    (and ``answer`` when asked to constrain or to cap the reasoning).
    """

    messages: tuple[Message, ...]
    qid: str = ""
    docids: tuple[str, ...] = field(default_factory=tuple)
    #: What the answer may look like (the method's :class:`rearank.grammar.AnswerGrammar`): what
    #: ``-O constrain=answer`` and ``-O max_think_tokens=N`` work with; None: the backend leaves the text free.
    answer: AnswerGrammar | None = None
    pair: tuple[str, str, str] | None = None

    def digest(self) -> str:
        """A short digest of the messages exactly as the backend receives them (16 hex digits of their SHA-256):
        the same window sent twice has the same digest, any change of template, truncation or passage text
        another. The traces record it per window (``prompt_digest``), so two runs can be compared window by
        window (:mod:`rearank.run.drift`)."""
        text = json.dumps([dict(m) for m in self.messages], sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


#: Finish reasons of a :class:`Generation`: the model stopped, hit ``max_new_tokens``, or the backend failed
#: (no text; the method keeps the window's input order and counts it).
STOP, LENGTH, ERROR = "stop", "length", "error"
FINISH_REASONS = (STOP, LENGTH, ERROR)

#: How a backend takes work (:attr:`Backend.calls`): ``batch``, a list of prompts per ``generate`` call (hf, vllm,
#: oracles); ``concurrent``, one prompt per call from many threads at once (a server behind HTTP), so the engine
#: keeps windows in flight instead of waiting for whole batches.
BATCH, CONCURRENT = "batch", "concurrent"
#: The ``concurrency`` (the engine's requests in flight on a concurrent backend) that lets the engine find the number
#: itself.
AUTO = "auto"
#: What a backend is for (:attr:`BackendBase.ROLE`): ``generator``, a chat model that writes text for any prompt (a
#: reranker, a RAG reader or selector, a judge of answers); ``scorer``, scores (query, passage) pairs without
#: generating; ``judge``, writes each prompt's ideal answer from relevance judgments; ``reader``, answers the
#: questions of a QA file (a reader behind a chat server) and does not rerank.
GENERATOR, SCORER, JUDGE, READER = "generator", "scorer", "judge", "reader"
ROLES = (GENERATOR, SCORER, JUDGE, READER)
#: How ``--engine ray`` runs a backend (:attr:`BackendBase.RAY`): Ray Data ``map_batches`` over an actor pool, each
#: actor building the backend once; or Ray Data LLM's vLLM engine replicas (:mod:`rearank.backends.ray`).
RAY_ACTORS, RAY_DATA_LLM = "actor pool", "Ray Data LLM"


@dataclass(frozen=True)
class Generation:
    """One output: text, token counts, why it stopped (one of :data:`FINISH_REASONS`), latency, how many
    times the server answered "too busy" (429/503) before this answer (``throttled``), and, when the backend
    followed the prompt's answer grammar, the tokens of the reasoning (``think_tokens``) and whether the backend
    closed it at ``max_think_tokens`` (``think_budget_hit``); a failed call (``finish_reason="error"``) says why in
    ``error`` (one line, e.g. ``request to URL failed (connection refused)``)."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str = STOP
    latency_s: float = 0.0
    throttled: int = 0
    think_tokens: int | None = None
    think_budget_hit: bool = False
    error: str = ""


@runtime_checkable
class Backend(Protocol):
    """Anything that turns a batch of prompts into one generation each, in order.

    ``calls`` says how it takes work (:data:`BATCH` or :data:`CONCURRENT`: the engine keeps its ``concurrency``
    of requests in flight). ``tokenizer`` is the model's tokenizer or
    None (then passage budgets in tokens count words). ``answer_format`` replaces the backend by one that
    answers in a method's format (only the oracles care); ``close`` frees what it holds. Subclass
    :class:`BackendBase` for the defaults.
    """

    name: str
    calls: str
    tokenizer: Any

    def generate(self, prompts: Sequence[Prompt], settings: SamplingSettings) -> list[Generation]:
        """Generate one :class:`Generation` per prompt, in the same order."""
        ...

    def answer_format(self, method: Any) -> Backend:
        """This backend for ``method`` (itself, unless it writes answers without a model)."""
        ...

    def close(self) -> None:
        """Free the model, processes or connections it holds."""
        ...


class BackendBase:
    """Defaults of the :class:`Backend` protocol; a backend is also a context manager that closes itself."""

    name = "backend"
    calls = BATCH
    tokenizer: Any = None
    #: Capability: its typed ``-O`` options (:class:`rearank.backends.options.Option`); others it accepts pass unchecked.
    OPTIONS: tuple[Option, ...] = ()
    #: Capability: what it is for (one of :data:`ROLES`); callers ask this, never a backend's name.
    ROLE = GENERATOR
    #: Capability: it takes ``model`` first; False: it takes none (the oracle).
    TAKES_MODEL = True
    #: Capability: it ranks by relevance judgments, given as ``qrels=`` (a run without qrels is refused).
    NEEDS_QRELS = False
    #: Capability: it runs a chat model in this process, named by a hub id, a local folder, a ``.gguf`` file or
    #: ``embedded`` (the default: a run without ``--model`` runs the embedded model), and applies its chat template.
    LOCAL_MODEL = False
    #: Capability: with the embedded model, a run that names no ``--max-new-tokens`` gets the short budget
    #: (:data:`rearank.run.config.EMBEDDED_MAX_NEW_TOKENS`: the 135M model cannot reason usefully, and a CPU runs it).
    EMBEDDED_SHORT_BUDGET = False
    #: Capability: prompts per call when a run names no batch size.
    BATCH_SIZE = 32
    #: Capability: the backend loads ``model``'s own Hugging Face tokenizer, so a driver elsewhere (Ray) can load
    #: the same one and cut passages to the same tokens.
    MODEL_TOKENIZER = False
    #: Capability: the methods whose prompts it answers (their names), or None for every method that prompts a
    #: chat model.
    FOR_METHODS: tuple[str, ...] | None = None
    #: Capability: how ``--engine ray`` runs it (:data:`RAY_ACTORS` or :data:`RAY_DATA_LLM`).
    RAY = RAY_ACTORS

    def generate(self, prompts: Sequence[Prompt], settings: SamplingSettings) -> list[Generation]:
        raise NotImplementedError

    def answer_format(self, method: Any) -> Backend:
        return self

    def close(self) -> None:
        return None

    def __enter__(self) -> BackendBase:  # noqa: PYI034 (Self needs Python 3.11)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
