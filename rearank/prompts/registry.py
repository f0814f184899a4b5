"""The one registry of prompt templates by name: every builtin template file, of either kind, and those an
installed package adds through the entry points ``rearank.templates``::

    [project.entry-points."rearank.templates"]
    toy = "toy_plugin.templates:TOY"   # a TemplateFile, or the path of a YAML file (its kind read from it)

A ``ranking`` template is read by :func:`rearank.prompts.load_template` (listwise and groupwise ``--template``); a
``rag`` prompt file by :func:`rearank.prompts.qa_files.load_prompt_file` (``rag eval --template``, the BAR-RAG
selector, the judge). :func:`resolve` turns a name or a path into the file; a name of the other kind is a one-line
error listing the names of the kind asked for.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from rearank.errors import RearankError
from rearank.plugins import Registry

RANKING, RAG = "ranking", "rag"
#: kind -> how errors name it.
KINDS = {RANKING: "ranking template", RAG: "RAG prompt file"}
_PACKAGE = Path(__file__).resolve().parents[1]
#: name -> (kind, file under ``rearank/``); ``barrag`` is the reader's name of the BAR-RAG generator prompt.
_BUILTINS = {
    "rearank": (RANKING, "prompts/rearank.yaml"),
    "rearank-answer": (RANKING, "prompts/rearank-answer.yaml"),
    "rankgpt": (RANKING, "prompts/rankgpt.yaml"),
    "grouprank": (RANKING, "methods/groupwise/grouprank.yaml"),
    "grouprank-answer": (RANKING, "methods/groupwise/grouprank-answer.yaml"),
    "grouprank-released": (RANKING, "methods/groupwise/grouprank-released.yaml"),
    "grouprank-released-answer": (RANKING, "methods/groupwise/grouprank-released-answer.yaml"),
    "plain": (RAG, "rag/templates/plain.yaml"),
    "rrpo": (RAG, "rag/templates/rrpo.yaml"),
    "barrag_selector": (RAG, "rag/templates/barrag_selector.yaml"),
    "barrag_generator": (RAG, "rag/templates/barrag_generator.yaml"),
    "barrag": (RAG, "rag/templates/barrag_generator.yaml"),
    "arena": (RAG, "rag/templates/arena.yaml"),
    "judge": (RAG, "rag/templates/judge.yaml"),
}
#: The builtin a user copies to start a file of each kind.
_STARTER = {RANKING: "rearank", RAG: "plain"}


@dataclass(frozen=True)
class TemplateFile:
    """A template's YAML file and its kind (``ranking`` or ``rag``)."""

    path: Path
    kind: str


class TemplateRegistry(Registry):
    """:class:`~rearank.plugins.Registry` of :class:`TemplateFile`; an entry point may name a bare path."""

    def __getitem__(self, name: str) -> TemplateFile:
        entry = super().__getitem__(name)
        if not isinstance(entry, TemplateFile):
            entry = self._loaded[name] = _as_file(name, entry)
        return entry


def _as_file(name: str, value: Any) -> TemplateFile:
    """An entry point's path as a :class:`TemplateFile`: a file with ``answer_format`` is a RAG prompt file."""
    if not isinstance(value, (str, os.PathLike)) or not Path(value).is_file():
        raise RearankError(f"the rearank.templates entry point {name!r} gave {value!r}, not a TemplateFile or the "
                           "path of a YAML file")
    try:
        data = yaml.safe_load(Path(value).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise RearankError(f"the rearank.templates entry point {name!r}: cannot read {value} ({err})") from None
    return TemplateFile(Path(value), RAG if isinstance(data, dict) and "answer_format" in data else RANKING)


TEMPLATES = TemplateRegistry("rearank.templates", "template",
                             {name: partial(TemplateFile, _PACKAGE / file, kind)
                              for name, (kind, file) in _BUILTINS.items()})


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
