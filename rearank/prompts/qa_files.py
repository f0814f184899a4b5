"""The RAG prompts as files: ``rearank/rag/templates/*.yaml``, named in :mod:`rearank.prompts.registry` (``plain``,
``rrpo``, ``barrag_selector``, ``barrag_generator`` alias ``barrag``, ``arena``, ``judge``), or any YAML file of the
same shape, so a user can run a paper's exact wording.

A file holds ``answer_format`` (which parser reads the output: ``plain``, ``barrag``, ``barrag-selector``,
``arena``), ``system``, ``user``, and for one-turn-per-passage layouts ``passage`` and an optional few-shot
``example`` (a list of ``{role, content}`` turns). Each format allows its own ``str.format`` placeholders
(:data:`PLACEHOLDERS`); any other is an error naming the file and field when the file is loaded.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from functools import lru_cache

import yaml

from rearank.errors import FormatError, RearankError
from rearank.prompts.registry import RAG, resolve
from rearank.types import Message

#: answer format -> placeholders allowed in ``system``/``user`` and in ``passage``.
PLACEHOLDERS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "plain": (frozenset({"question", "passages"}), frozenset({"index", "title", "passage"})),
    "barrag": (frozenset({"question", "docs"}), frozenset()),
    "barrag-selector": (frozenset({"question", "docs", "k"}), frozenset()),
    "arena": (frozenset({"question", "references"}), frozenset()),
    "judge": (frozenset({"answers", "response"}), frozenset()),
}


@dataclass(frozen=True)
class PromptFile:
    """A loaded RAG prompt file."""

    name: str
    answer_format: str
    system: str
    user: str
    passage: str = ""
    example: tuple[Message, ...] = ()

    def messages(self, turns: tuple[Message, ...] = (), **fields: object) -> list[Message]:
        """system, the example turns, ``turns`` (one per passage, if any), then ``user``, filled with ``fields``."""
        out: list[Message] = [{"role": "system", "content": self.system.format(**fields)}] if self.system else []
        return [*out, *self.example, *turns, {"role": "user", "content": self.user.format(**fields)}]


def _names(text: str, where: str) -> set[str]:
    try:
        return {field for _, field, _, _ in string.Formatter().parse(text) if field is not None}
    except ValueError as err:
        raise RearankError(f"{where}: {err} (write a literal brace as {{{{ or }}}})") from None


@lru_cache(maxsize=64)
def load_prompt_file(spec: str) -> PromptFile:
    """A RAG prompt file by name (:mod:`rearank.prompts.registry`) or by path; checked as the module docstring
    says."""
    path = resolve(spec, RAG)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise FormatError(path, None, f"not a readable YAML prompt ({err})") from None
    if not isinstance(raw, dict):
        raise FormatError(path, None, "expected a mapping with answer_format, system and user")
    fmt = raw.get("answer_format")
    if fmt not in PLACEHOLDERS:
        raise FormatError(path, None, f"answer_format must be one of {', '.join(PLACEHOLDERS)}, got {fmt!r}")
    fields, passage_fields = PLACEHOLDERS[fmt]
    texts = {key: raw.get(key, "") for key in ("system", "user", "passage")}
    for key, value in texts.items():
        if not isinstance(value, str):
            raise FormatError(path, None, f"{key!r} must be a string")
        allowed = passage_fields if key == "passage" else fields
        unknown = _names(value, f"{path}: {key}") - allowed
        if unknown:
            raise FormatError(path, None, f"{key!r} uses unknown placeholders {sorted(unknown)}; allowed: "
                              f"{sorted(allowed)}")
    if not texts["user"]:
        raise FormatError(path, None, "'user' (the final user turn) is required")
    example = raw.get("example") or []
    if not isinstance(example, list) or not all(
        isinstance(m, dict) and m.get("role") in ("user", "assistant") and isinstance(m.get("content"), str)
        for m in example
    ):
        raise FormatError(path, None, "'example' must be a list of {role: user|assistant, content: text}")
    return PromptFile(str(raw.get("name") or path.stem), fmt, texts["system"], texts["user"], texts["passage"],
                      tuple({"role": m["role"], "content": m["content"]} for m in example))
