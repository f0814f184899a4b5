"""The one backend protocol: a batch of chat conversations and sampling settings in, texts out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from rearank.types import Message

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

    ``qid`` and ``docids`` (in presented order) let the oracle backend judge the window;
    LLM backends use ``messages`` only.
    """

    messages: tuple[Message, ...]
    qid: str = ""
    docids: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Generation:
    """One output: text, token counts, why it stopped (``stop``, ``length`` or ``error``), latency."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str = "stop"
    latency_s: float = 0.0


@runtime_checkable
class Backend(Protocol):
    """Anything that turns a batch of prompts into one generation each, in order."""

    name: str

    def generate(self, prompts: Sequence[Prompt], settings: SamplingSettings) -> list[Generation]:
        """Generate one :class:`Generation` per prompt, in the same order."""
        ...
