"""Prompt templates: YAML files whose message fields are ``str.format`` strings, checked when they are loaded.

A template can express the published listwise layouts (see ``rearank.yaml`` and ``docs/training.md``):

* ``system``: an optional system message;
* ``prefix_user`` / ``prefix_assistant``: an optional task exchange before the passages;
* ``passage_user``: one user turn per passage (``layout: messages``), each answered by ``passage_assistant``
  when that field is given (leave it out for no acknowledgements); or, with ``layout: inline``, every passage
  rendered by ``passage_user``, joined by ``passage_separator`` and put into ``post`` at ``{passages}``;
* ``post``: the final user turn (query, output instructions);
* ``passage_budget``: how much of each passage is kept -- ``400 characters``, ``300 words``, ``300 tokens``
  (of the model's tokenizer) or ``none``; ``neutralize_ids``: rewrite ``[3]`` inside passages as ``(3)``;
* ``reasoning``: whether the template asks the model to reason before it answers (default: whether a message field
  mentions ``<think>`` or ``<reason>``); ``variant``: the template (a name, or a file path relative to this one)
  that asks the same with the other reasoning setting, which the reasoning switch picks
  (:func:`rearank.methods.templates.with_reasoning`).

``{query}`` and ``{num}`` may appear in every message field; ``{index}`` in the passage fields; ``{passage}``
in ``passage_user``; ``{passages}`` in ``post`` (inline layout). Anything else is an error that names the file
and the field, so a typo in a user's ``--template`` file fails before any model runs.
"""

from __future__ import annotations

import functools
import re
import string
from dataclasses import dataclass
from pathlib import Path

import yaml

from rearank.errors import FormatError

#: Units a passage budget can be declared in.
BUDGET_UNITS = ("characters", "words", "tokens")
#: Passage layouts: one chat turn per passage, or all passages inside ``post``.
LAYOUTS = ("messages", "inline")


@dataclass(frozen=True)
class PassageBudget:
    """How much of each passage a prompt keeps: ``size`` units (``None``: the whole passage)."""

    size: int | None
    unit: str = "characters"

    def __str__(self) -> str:
        return "none" if self.size is None else f"{self.size} {self.unit}"

    @classmethod
    def parse(cls, text: object) -> PassageBudget:
        """Read ``400 characters`` / ``400c`` / ``300 words`` / ``300w`` / ``300 tokens`` / ``300t`` / ``none``.

        A bare integer counts tokens; 0 means no cut.
        Raises ``ValueError`` with the accepted forms.
        """
        if isinstance(text, PassageBudget):
            return text
        if isinstance(text, int) and not isinstance(text, bool):
            if text < 0:
                return cls._bad(text)
            return cls(text, "tokens") if text else cls(None)
        raw = str(text).strip().lower()
        if raw in ("none", "0", "off"):
            return cls(None)
        match = _BUDGET.fullmatch(raw)
        if not match:
            return cls._bad(text)
        size, unit = int(match.group(1)), match.group(2) or "t"
        full = next(u for u in BUDGET_UNITS if u.startswith(unit[0]))
        if size < 1:
            return cls._bad(text)
        return cls(size, full)

    @staticmethod
    def _bad(text: object) -> PassageBudget:
        raise ValueError(f"passage budget {text!r}: write N characters, N words or N tokens (N >= 1; or c/w/t "
                         "after the number, e.g. 400c), or none")


_BUDGET = re.compile(r"(\d+)\s*(c|chars?|characters?|w|words?|t|tokens?)?")
#: The budget of a template that declares none: 300 tokens.
DEFAULT_BUDGET = PassageBudget(300, "tokens")


@dataclass(frozen=True)
class FieldRule:
    """Placeholders a template field must contain and may contain."""

    required: frozenset[str]
    allowed: frozenset[str]
    optional: bool = False


def _rule(required: str = "", allowed: str = "", optional: bool = False) -> FieldRule:
    req = frozenset(required.split())
    return FieldRule(req, req | frozenset(allowed.split()) | {"num", "query"}, optional)


#: Message fields of a template, in message order, with their placeholder rules.
FIELDS: dict[str, FieldRule] = {
    "system": _rule(optional=True),
    "prefix_user": _rule(optional=True),
    "prefix_assistant": _rule(optional=True),
    "passage_user": _rule(required="index passage"),
    "passage_assistant": _rule(allowed="index", optional=True),
    "post": _rule(required="query", allowed="passages"),
}
#: Settings of a template (not message text).
_SETTINGS = ("name", "description", "passage_budget", "neutralize_ids", "layout", "passage_separator", "reasoning",
             "variant")
#: Tags whose mention in a template's messages means it asks for reasoning (when it sets no ``reasoning``).
_REASONING_TAGS = ("<think>", "<reason>")


@dataclass(frozen=True)
class PromptTemplate:
    """The texts and settings of a listwise prompt. Empty ``system``/prefix/``passage_assistant``: not sent."""

    name: str
    system: str
    passage_user: str
    post: str
    passage_assistant: str = ""
    prefix_user: str = ""
    prefix_assistant: str = ""
    passage_budget: PassageBudget = DEFAULT_BUDGET
    neutralize_ids: bool = True
    layout: str = "messages"
    passage_separator: str = "\n"
    description: str = ""
    source: str = ""
    reasoning: bool = True
    variant: str = ""


def read_template(path: str | Path | PromptTemplate) -> PromptTemplate:
    """The ranking template in the YAML file ``path`` (a name is resolved by
    :func:`rearank.methods.templates.load_template`); a :class:`PromptTemplate` is returned as is. Raises
    :class:`FormatError` (file and field named) for a malformed file."""
    if isinstance(path, PromptTemplate):
        return path
    path = Path(path)
    try:
        mtime = path.stat().st_mtime_ns
    except OSError as err:
        raise FormatError(path, None, f"cannot read prompt template ({err})") from None
    return _load_file(str(path.resolve()), mtime)


@functools.lru_cache(maxsize=32)
def _load_file(path: str, mtime_ns: int) -> PromptTemplate:
    """Parse and check a template file (cached per path and modification time)."""
    try:
        raw = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise FormatError(path, None, f"cannot read prompt template ({err})") from None
    try:
        data = yaml.safe_load(raw)
        lines = _key_lines(raw)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        raise FormatError(path, mark.line + 1 if mark else None, f"invalid YAML ({err})") from None
    except RecursionError:
        raise FormatError(path, None, "YAML nested too deeply") from None
    if not isinstance(data, dict):
        raise FormatError(path, None, "a prompt template must be a YAML mapping of field: text")
    for key in data:
        if key not in FIELDS and key not in _SETTINGS:
            known = ", ".join([*FIELDS, *_SETTINGS])
            raise FormatError(path, lines.get(key), f"unknown field {key!r}; known fields: {known}")
    values: dict[str, str] = {}
    for key in (*FIELDS, "name", "description", "layout", "passage_separator", "variant"):
        value = data.get(key)
        if value is None:
            if key in FIELDS and not FIELDS[key].optional:
                raise FormatError(path, None, f"missing field {key!r}")
            value = {"layout": "messages", "passage_separator": "\n"}.get(key, "")
        if not isinstance(value, str):
            raise FormatError(path, lines.get(key), f"field {key!r} must be text, got {type(value).__name__}")
        if key in FIELDS:
            check_field(value, key, path, lines.get(key))
        values[key] = value
    if bool(values["prefix_user"]) != bool(values["prefix_assistant"]):
        raise FormatError(path, None, "give both 'prefix_user' and 'prefix_assistant', or neither")
    _check_layout(values, path, lines)
    try:
        budget = PassageBudget.parse(data["passage_budget"]) if "passage_budget" in data else DEFAULT_BUDGET
    except ValueError as err:
        raise FormatError(path, lines.get("passage_budget"), str(err)) from None
    neutralize = data.get("neutralize_ids", True)
    if not isinstance(neutralize, bool):
        raise FormatError(path, lines.get("neutralize_ids"), "field 'neutralize_ids' must be true or false")
    reasoning = data.get("reasoning", any(tag in values[key].lower() for key in FIELDS for tag in _REASONING_TAGS))
    if not isinstance(reasoning, bool):
        raise FormatError(path, lines.get("reasoning"), "field 'reasoning' must be true or false")
    name = values.pop("name") or Path(path).stem
    return PromptTemplate(name=name, source=path, passage_budget=budget, neutralize_ids=neutralize,
                          reasoning=reasoning, **values)


def as_reasoning(value: object) -> bool | None:
    """The reasoning switch from ``on``/``off`` (also true/false, yes/no, 1/0) or a bool; None: the template's own.
    Raises ``ValueError`` for anything else."""
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("on", "true", "yes", "1"):
        return True
    if text in ("off", "false", "no", "0"):
        return False
    raise ValueError(f"reasoning must be on or off, got {value!r}")


def _check_layout(values: dict[str, str], path: str, lines: dict[str, int]) -> None:
    layout = values["layout"]
    if layout not in LAYOUTS:
        raise FormatError(path, lines.get("layout"), f"field 'layout' must be one of {', '.join(LAYOUTS)}")
    has_slot = "passages" in _names(values["post"])
    if layout == "inline" and not has_slot:
        raise FormatError(path, lines.get("post"), "field 'post': layout inline needs the placeholder {passages}")
    if layout == "messages" and has_slot:
        raise FormatError(path, lines.get("post"), "field 'post': {passages} needs 'layout: inline'")
    if layout == "inline" and values["passage_assistant"]:
        raise FormatError(path, lines.get("passage_assistant"),
                          "field 'passage_assistant': acknowledgements need 'layout: messages'")


def _names(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def _key_lines(raw: str) -> dict[str, int]:
    """Line (1-based) of each top-level key, for error messages."""
    node = yaml.compose(raw)
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {key.value: key.start_mark.line + 1 for key, _ in node.value if isinstance(key, yaml.ScalarNode)}


def check_field(text: str, field: str, path: str = "<template>", line: int | None = None) -> None:
    """Check one field's placeholders against :data:`FIELDS`; raise :class:`FormatError` naming file and field."""
    rule = FIELDS[field]
    allowed = ", ".join("{" + p + "}" for p in sorted(rule.allowed)) or "none"
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError as err:
        raise FormatError(path, line, f"field {field!r}: {err} (write literal braces as {{{{ and }}}})") from None
    found: set[str] = set()
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if name == "" or name.isdigit():
            raise FormatError(path, line, f"field {field!r}: positional placeholder {{{name}}}; use named: {allowed}")
        if name not in rule.allowed:
            raise FormatError(path, line, f"field {field!r}: unknown placeholder {{{name}}}; allowed: {allowed}")
        if spec or conversion:
            raise FormatError(path, line, f"field {field!r}: placeholder {{{name}}} takes no format spec or conversion")
        found.add(name)
    missing = rule.required - found
    if missing:
        need = ", ".join("{" + p + "}" for p in sorted(missing))
        raise FormatError(path, line, f"field {field!r}: missing required placeholder {need}")
