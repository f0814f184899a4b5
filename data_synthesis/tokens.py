"""Tokenizer loading and fast prompt-length counting for many sets of the same passages.

Tokenizing every rendered prompt (a few thousand tokens each, thousands of sets) would dominate synthesis, so
each distinct passage is tokenized once and a set's prompt length is counted as

    tokens(prompt of the set) = overhead(query) + sum of tokens(passage) over the set's passages,

where ``overhead(query)`` (template, query text, chat markup, passage numbers) is measured exactly on one set of
the query (passages as :func:`rearank.prompts.render_passages` renders them). This is exact when tokens never
span a passage's boundary, which holds for the builtin templates
(each passage sits in its own chat message, after ``"] "``) and byte-level BPE tokenizers;
:meth:`data_synthesis.set_prompts.TemplatePrompts.lengths` recounts sampled sets exactly and the stats report the
error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rearank.backends.models import resolve_model
from rearank.errors import RearankError
from rearank.prompts import PromptTemplate

#: ``--tokenizer`` value that turns token counting off (a token budget then cuts passages by whitespace words).
NO_TOKENIZER = "none"


def load_tokenizer(name: str | None) -> Any | None:
    """A Hugging Face tokenizer with a chat template, or None for ``"none"``.

    ``None``/``"embedded"``: the embedded SmolLM2's; otherwise a local model folder, a ``.gguf`` file or a hub id.
    """
    if name is not None and name.strip().lower() == NO_TOKENIZER:
        return None
    source = resolve_model(name)
    try:
        from transformers import AutoTokenizer

        if source.gguf_file:
            tokenizer = AutoTokenizer.from_pretrained(source.path, gguf_file=source.gguf_file)
        else:
            tokenizer = AutoTokenizer.from_pretrained(source.path)
    except (OSError, ValueError, ImportError) as err:
        raise RearankError(
            f"cannot load tokenizer {name!r} ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}); "
            f"pass a local model folder, a .gguf file, 'embedded' or '{NO_TOKENIZER}'"
        ) from None
    if not getattr(tokenizer, "chat_template", None):
        raise RearankError(f"tokenizer {name!r} has no chat template; prompts are chat messages, pick a chat model's")
    return tokenizer


def count_tokens(tokenizer: Any, texts: Sequence[str]) -> list[int]:
    """Token counts without special tokens (one batched call: a fast tokenizer uses every core)."""
    if not texts:
        return []
    return [len(ids) for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"]]


class PromptTokenCounter:
    """Counts chat-prompt tokens as verl does (chat template with generation prompt, no extra special tokens)."""

    def __init__(self, tokenizer: Any, template: PromptTemplate) -> None:
        self.tokenizer = tokenizer
        head = template.passage_user.split("{passage}", 1)[0]
        # A single space before the passage joins its first word's token in byte-level BPE: count it with it.
        self.lead = " " if head.endswith(" ") and not head.endswith("  ") else ""

    def passage_lengths(self, passages: Sequence[str]) -> list[int]:
        """Tokens of each passage as it appears in a prompt (``passages`` as :func:`rearank.prompts.render_passages` left them)."""
        return count_tokens(self.tokenizer, [self.lead + p for p in passages])

    def exact(self, prompts: Sequence[list[dict]]) -> list[int]:
        """Exact token counts of chat prompts (batched)."""
        return prompt_tokens(self.tokenizer, prompts)


def prompt_tokens(tokenizer: Any, prompts: Sequence[list[dict]]) -> list[int]:
    """Exact token counts of chat prompts as verl counts them (chat template with generation prompt; batched)."""
    rendered = [tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
                for messages in prompts]
    return count_tokens(tokenizer, rendered)
