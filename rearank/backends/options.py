"""Typed backend options: each backend class declares ``OPTIONS``; ``-O KEY=VALUE`` values are checked against them.

A value given on the command line is read as YAML (``-O timeout_s=30``, ``-O extra_body={a: 1}``) and must fit
its option's kind and bounds; a mismatch is a one-line :class:`RearankError` naming the option. Options a
backend accepts but does not declare are passed through unchecked.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rearank.errors import RearankError
from rearank.io.files import parse_yaml

#: ``count``: a whole number or ``auto`` (the engine finds it: ``-O concurrency=auto``); ``device``: a torch device
#: this machine has (``cpu``, ``cuda``, ``cuda:N``, ``mps``).
KINDS = ("int", "float", "bool", "str", "mapping", "count", "device")


@dataclass(frozen=True)
class Option:
    """One backend option: its kind (one of :data:`KINDS`), optional bounds, and whether ``None`` is allowed."""

    name: str
    kind: str
    minimum: float | None = None
    maximum: float | None = None
    above_minimum: bool = False  # True: value > minimum (else >=)
    nullable: bool = True

    def check(self, value: Any, backend: str) -> Any:
        """Return ``value`` fitted to the option (an int where a float is wanted becomes a float), or raise."""
        where = f"backend option {self.name}={value!r} ({backend})"
        if value is None and self.nullable:
            return None
        if self.kind == "mapping":
            if not isinstance(value, Mapping):
                raise RearankError(f"{where}: expected a mapping such as {{key: value}}, got {_kind(value)}")
            return dict(value)
        if self.kind == "str":
            if not isinstance(value, str) or not value:
                raise RearankError(f"{where}: expected a non-empty text, got {_kind(value)}")
            return value
        if self.kind == "count" and value == "auto":
            return value
        if self.kind == "device":
            return check_device(value, where)
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise RearankError(f"{where}: expected true or false, got {_kind(value)}")
            return value
        wanted = (int, float) if self.kind == "float" else int
        if isinstance(value, bool) or not isinstance(value, wanted) or not math.isfinite(value):
            noun = {"int": "a whole number", "count": "a whole number or auto"}.get(self.kind, "a number")
            raise RearankError(f"{where}: expected {noun}, got {_kind(value)}")
        low_ok = self.minimum is None or (value > self.minimum if self.above_minimum else value >= self.minimum)
        if not low_ok or (self.maximum is not None and value > self.maximum):
            raise RearankError(f"{where}: must be {self._bounds()}")
        return float(value) if self.kind == "float" else value

    def _bounds(self) -> str:
        parts = []
        if self.minimum is not None:
            parts.append(f"{'>' if self.above_minimum else '>='} {self.minimum:g}")
        if self.maximum is not None:
            parts.append(f"<= {self.maximum:g}")
        return " and ".join(parts)


def check_device(value: Any, where: str) -> str:
    """``value`` if it names a torch device this machine has (``cpu``, ``cuda``, ``cuda:N``, ``mps``), else a
    one-line :class:`RearankError` starting with ``where`` (checked before a model loads or a file is written)."""
    name, _, index = str(value).partition(":")
    if not isinstance(value, str) or name not in ("cpu", "cuda", "mps") or (index and not index.isdigit()) \
            or (index and name != "cuda"):
        raise RearankError(f"{where}: expected cpu, cuda, cuda:N or mps, got {_kind(value)}")
    if name == "cpu":
        return value
    import torch

    if name == "mps":
        available = torch.backends.mps.is_available()
        count = 1
    else:
        available = torch.cuda.is_available()
        count = torch.cuda.device_count() if available else 0
    if not available or (index and int(index) >= count):
        have = f"{count} CUDA device(s)" if name == "cuda" and available else f"no {name.upper()} device"
        raise RearankError(f"{where}: this machine has {have} (as torch sees it); use -O device=cpu, or run where "
                           f"{value} is")
    return value


def _kind(value: Any) -> str:
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return f"{type(value).__name__} {value!r}"


def parse_pairs(pairs: Iterable[str]) -> dict[str, Any]:
    """``KEY=VALUE`` strings into a dict; values read as YAML (plain text when not YAML); dashes in keys -> ``_``."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise RearankError(f"--backend-option {pair!r}: expected KEY=VALUE")
        name = key.strip().replace("-", "_")
        try:
            options[name] = parse_yaml(value, f"--backend-option {name}") if value else ""
        except RearankError as err:
            if "nested too deeply" in str(err):
                raise
            options[name] = value  # not YAML: keep the text as given
    return options


def check_options(backend: str, declared: Iterable[Option], options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with every declared one checked and fitted; undeclared ones are returned unchanged."""
    table = {option.name: option for option in declared}
    return {name: (table[name].check(value, backend) if name in table else value) for name, value in options.items()}
