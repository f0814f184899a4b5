"""RAG prompt files: YAML files of a reader's or selector's chat, read by path (names are resolved by
:mod:`rearank.methods.templates`, built from the method cards), so a user can run a paper's exact wording.

A file holds ``answer_format`` (the card whose parser reads the output: ``plain``, ``barrag-generator``,
``barrag-selector``, ``arena``, a plugin's card, or ``judge``), ``system``, ``user``, and for
one-turn-per-passage layouts ``passage`` and an optional few-shot ``example`` (a list of ``{role, content}``
turns). Each format allows its own ``str.format`` placeholders (a card's ``placeholders``;
:data:`JUDGE_PLACEHOLDERS`); any other is an error naming the file and field when the file is read.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from rearank.errors import FormatError, RearankError
from rearank.types import Message

#: Placeholders as a card declares them: those allowed in ``system``/``user``, and in ``passage``.
Placeholders = tuple[frozenset[str], frozenset[str]]
#: The LLM judge's prompt (not a method: a template of its own, ``judge``) and its placeholders.
JUDGE = Path(__file__).resolve().parent / "judge.yaml"
JUDGE_PLACEHOLDERS: Placeholders = (frozenset({"answers", "response"}), frozenset())


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


def read_prompt_file(path: Path, formats: Mapping[str, Placeholders]) -> PromptFile:
    """The RAG prompt file at ``path``, whose ``answer_format`` must be one of ``formats`` (answer format -> its
    placeholders); checked as the module docstring says."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise FormatError(path, None, f"not a readable YAML prompt ({err})") from None
    if not isinstance(raw, dict):
        raise FormatError(path, None, "expected a mapping with answer_format, system and user")
    fmt = raw.get("answer_format")
    if fmt not in formats:
        raise FormatError(path, None, f"answer_format must be one of {', '.join(formats)}, got {fmt!r}")
    fields, passage_fields = formats[fmt]
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
