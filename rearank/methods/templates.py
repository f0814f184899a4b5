"""The one registry of prompt templates by name, built from the method cards (:data:`rearank.methods.card.CARDS`:
each card's templates, files in its folder), the judge's prompt, and those an installed package adds through the
entry points ``rearank.templates``::

    [project.entry-points."rearank.templates"]
    toy = "toy_plugin.templates:TOY"   # a TemplateFile, or the path of a YAML file (its kind read from it)

A ``ranking`` template is read by :func:`load_template` (listwise and groupwise ``--template``); a ``rag`` prompt
file by :func:`load_prompt_file` (``rag eval --template``, the BAR-RAG selector, the judge). A template's kind is
read from its file (a RAG prompt file names its ``answer_format``). :func:`resolve` turns a name or a path into the
file; a name of the other kind is a one-line error listing the names of the kind asked for.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from rearank.errors import FormatError, RearankError
from rearank.methods.card import RANK, cards
from rearank.plugins import Registry
from rearank.prompts.qa_files import JUDGE, JUDGE_PLACEHOLDERS, Placeholders, PromptFile, read_prompt_file
from rearank.prompts.templates import PromptTemplate, read_template

RANKING, RAG = "ranking", "rag"
#: kind -> how errors name it.
KINDS = {RANKING: "ranking template", RAG: "RAG prompt file"}
#: The builtin a user copies to start a file of each kind.
_STARTER = {RANKING: "rearank", RAG: "plain"}


@dataclass(frozen=True)
class TemplateFile:
    """A template's YAML file and its kind (``ranking`` or ``rag``)."""

    path: Path
    kind: str


class TemplateRegistry(Registry):
    """:class:`~rearank.plugins.Registry` of :class:`TemplateFile`: the cards' templates (read on first use) and
    the entry points' (which may name a bare path)."""

    def _all(self) -> dict:
        if self._loaders is None:
            self._builtins = {**_card_templates(), **_OWN}
        return super()._all()

    def __getitem__(self, name: str) -> TemplateFile:
        entry = super().__getitem__(name)
        if not isinstance(entry, TemplateFile):
            entry = self._loaded[name] = as_file(name, entry)
        return entry

    @property
    def builtin_names(self) -> list[str]:
        self._all()
        return super().builtin_names


def _card_templates() -> dict[str, Any]:
    """Name -> loader of every card's templates, rearank's cards first."""
    out: dict[str, Any] = {}
    for card in cards():
        for name, path in card.template_files().items():
            if name in out:
                warnings.warn(f"template {name!r} of card {card.name!r} is ignored: the name is taken", stacklevel=3)
                continue
            out[name] = (lambda name=name, path=path: as_file(name, path))
    return out


def as_file(name: str, value: Any) -> TemplateFile:
    """A template's path as a :class:`TemplateFile`: a file with ``answer_format`` is a RAG prompt file."""
    if isinstance(value, TemplateFile):
        return value
    if not isinstance(value, (str, os.PathLike)) or not Path(value).is_file():
        raise RearankError(f"the rearank.templates entry point {name!r} gave {value!r}, not a TemplateFile or the "
                           "path of a YAML file")
    try:
        data = yaml.safe_load(Path(value).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise RearankError(f"template {name!r}: cannot read {value} ({err})") from None
    return TemplateFile(Path(value), RAG if isinstance(data, dict) and "answer_format" in data else RANKING)


#: Templates that belong to no method: the LLM judge's prompt.
_OWN = {"judge": lambda: TemplateFile(JUDGE, RAG)}
TEMPLATES = TemplateRegistry("rearank.templates", "template", _OWN)


def names(kind: str) -> list[str]:
    """The registered names of one kind (an entry point that fails to load is left out, with a warning)."""
    found = []
    for name in TEMPLATES:
        try:
            if TEMPLATES[name].kind == kind:
                found.append(name)
        except RearankError as err:
            warnings.warn(str(err), stacklevel=2)
    return found


def resolve(name_or_path: str | os.PathLike[str], kind: str) -> Path:
    """The file of a registered name of ``kind``, else of an existing path; a one-line :class:`RearankError`
    otherwise (a name of the other kind, or neither a name nor a file), listing the names of ``kind``."""
    text = str(name_or_path)
    if text in TEMPLATES:
        entry = TEMPLATES[text]
        if entry.kind != kind:
            raise RearankError(f"prompt template {text!r} is a {KINDS[entry.kind]}, not a {KINDS[kind]}; "
                               f"choose one of: {', '.join(names(kind))}, or the path of a YAML file")
        return entry.path
    path = Path(text).expanduser()
    if path.is_file():
        return path
    raise RearankError(f"prompt template {text!r}: not a builtin {KINDS[kind]} ({', '.join(names(kind))}) and no "
                       f"such file; pass a name or the path of a YAML file (copy {TEMPLATES[_STARTER[kind]].path} "
                       "to start)")


def load_template(name_or_path: str | os.PathLike[str] | PromptTemplate) -> PromptTemplate:
    """A ranking template by name (``rearank``, ``rankgpt``, ``grouprank``, ...) or a user's YAML file by path
    (:func:`rearank.prompts.read_template`); a :class:`PromptTemplate` is returned as is."""
    if isinstance(name_or_path, PromptTemplate):
        return name_or_path
    return read_template(resolve(name_or_path, RANKING))


def with_reasoning(template: str | os.PathLike[str] | PromptTemplate, reasoning: bool | None) -> PromptTemplate:
    """``template``, or its ``variant`` when ``reasoning`` (True: reason, then answer; False: answer only) is not
    what it asks; None keeps it. A :class:`RearankError` when it names no variant, a
    :class:`~rearank.errors.FormatError` when the variant asks the same as it."""
    tpl = load_template(template)
    if reasoning is None or reasoning == tpl.reasoning:
        return tpl
    want = "with" if reasoning else "without"
    if not tpl.variant:
        raise RearankError(f"prompt template {tpl.name!r} {'asks for' if tpl.reasoning else 'does not ask for'} "
                           f"reasoning and names no variant {want} it ('variant:'); drop --reasoning, or pass a "
                           f"template {want} reasoning")
    beside = Path(tpl.source).parent / tpl.variant if tpl.source else None
    other = load_template(beside if beside is not None and beside.is_file() else tpl.variant)
    if other.reasoning != reasoning:
        raise FormatError(tpl.source, None, f"field 'variant': {tpl.variant!r} is not a template {want} reasoning")
    return other


def answer_formats() -> dict[str, Placeholders]:
    """Answer format -> placeholders: every reader and selector card's, and the judge's."""
    formats = {card.name: card.placeholders for card in cards() if card.kind != RANK and card.placeholders}
    return {**formats, "judge": JUDGE_PLACEHOLDERS}


@lru_cache(maxsize=64)
def _prompt_file(path: Path, mtime_ns: int) -> PromptFile:
    return read_prompt_file(path, answer_formats())


def load_prompt_file(spec: str | os.PathLike[str] | PromptFile) -> PromptFile:
    """A RAG prompt file by name or by path, its ``answer_format`` one of :func:`answer_formats`; a
    :class:`PromptFile` is returned as is."""
    if isinstance(spec, PromptFile):
        return spec
    path = resolve(spec, RAG)
    return _prompt_file(path, path.stat().st_mtime_ns)
