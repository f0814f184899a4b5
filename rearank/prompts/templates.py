"""Prompt templates: YAML files whose fields are ``str.format`` strings, checked when they are loaded.

A template holds the text of each message of a listwise window (see ``rearank.yaml`` for the layout).
Every field has the placeholders it must and may use (:data:`FIELDS`); anything else is an error that
names the file and the field, so a typo in a user's ``--prompt`` file fails before any model runs.
"""

from __future__ import annotations

import functools
import string
from dataclasses import dataclass
from pathlib import Path

import yaml

from rearank.errors import FormatError, RearankError

BUILTIN_DIR = Path(__file__).resolve().parent
BUILTINS = ("rearank", "rankgpt")


@dataclass(frozen=True)
class FieldRule:
    """Placeholders a template field must contain and may contain."""

    required: frozenset[str]
    allowed: frozenset[str]
    optional: bool = False


def _rule(required: str = "", allowed: str = "", optional: bool = False) -> FieldRule:
    req = frozenset(required.split())
    return FieldRule(req, req | frozenset(allowed.split()), optional)


#: Message fields of a template, in message order, with their placeholder rules.
FIELDS: dict[str, FieldRule] = {
    "system": _rule(allowed="num query", optional=True),
    "prefix_user": _rule(allowed="num query", optional=True),
    "prefix_assistant": _rule(allowed="num query", optional=True),
    "passage_user": _rule(required="index passage"),
    "passage_assistant": _rule(allowed="index"),
    "post": _rule(required="query", allowed="num"),
}
_META = ("name", "description")


@dataclass(frozen=True)
class PromptTemplate:
    """The texts of a listwise prompt. An empty ``system`` sends no system message; the prefix pair is optional."""

    name: str
    system: str
    passage_user: str
    passage_assistant: str
    post: str
    prefix_user: str = ""
    prefix_assistant: str = ""
    description: str = ""
    source: str = ""


def load_template(name_or_path: str | Path | PromptTemplate) -> PromptTemplate:
    """Load a builtin template by name (``rearank``, ``rankgpt``) or a user's YAML file by path.

    A :class:`PromptTemplate` is returned as is. Raises :class:`FormatError` (file and field named)
    for a malformed file and :class:`RearankError` for an unknown name.
    """
    if isinstance(name_or_path, PromptTemplate):
        return name_or_path
    text = str(name_or_path)
    path = BUILTIN_DIR / f"{text}.yaml" if text in BUILTINS else Path(text).expanduser()
    if path.is_file():
        return _load_file(str(path.resolve()), path.stat().st_mtime_ns)
    raise RearankError(
        f"prompt template {text!r}: not a builtin ({', '.join(BUILTINS)}) and no such file; "
        f"pass a builtin name or the path of a YAML template (copy {BUILTIN_DIR / 'rearank.yaml'} to start)"
    )


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
        if key not in FIELDS and key not in _META:
            known = ", ".join([*FIELDS, *_META])
            raise FormatError(path, lines.get(key), f"unknown field {key!r}; known fields: {known}")
    values: dict[str, str] = {}
    for key in (*FIELDS, *_META):
        value = data.get(key)
        if value is None:
            if key in FIELDS and not FIELDS[key].optional:
                raise FormatError(path, None, f"missing field {key!r}")
            value = ""
        if not isinstance(value, str):
            raise FormatError(path, lines.get(key), f"field {key!r} must be text, got {type(value).__name__}")
        if key in FIELDS:
            check_field(value, key, path, lines.get(key))
        values[key] = value
    if bool(values["prefix_user"]) != bool(values["prefix_assistant"]):
        raise FormatError(path, None, "give both 'prefix_user' and 'prefix_assistant', or neither")
    name = values.pop("name") or Path(path).stem
    return PromptTemplate(name=name, source=path, **values)


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
