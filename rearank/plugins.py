"""Registries that packages outside rearank extend through entry points.

A registry maps a name to something loaded on first use: rearank's own entries are named in code beside the
kind they register (:data:`rearank.methods.card.CARDS`, :data:`rearank.backends.registry.BACKENDS`), and every
installed distribution may add more in its ``pyproject.toml``::

    [project.entry-points."rearank.cards"]
    toy = "toy_plugin.method:CARD"
    [project.entry-points."rearank.backends"]
    toy = "toy_plugin.backend:ToyBackend"

Nothing is imported until a name is used; a name that is already taken keeps its first owner (rearank's own
entries come first) and the clash is reported as a warning.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from rearank.errors import RearankError


class Registry(Mapping[str, Any]):
    """``name -> object`` of one kind: ``builtins`` (name -> a loader called without arguments) and the entry
    points of ``group``, read once on first access. ``registry[name]`` loads and caches the object; iterating
    lists names without loading anything."""

    def __init__(self, group: str, kind: str, builtins: Mapping[str, Callable[[], Any]]) -> None:
        self.group, self.kind = group, kind
        self._builtins = dict(builtins)
        self._loaders: dict[str, Callable[[], Any]] | None = None
        self._loaded: dict[str, Any] = {}

    def _all(self) -> dict[str, Callable[[], Any]]:
        if self._loaders is None:
            loaders = dict(self._builtins)
            for point in entry_points(group=self.group):
                if point.name in loaders:
                    warnings.warn(f"{self.group} entry point {point.name!r} ({point.value}) is ignored: the name "
                                  f"is taken by another {self.kind}", stacklevel=2)
                    continue
                loaders[point.name] = _loader(point, self.group)
            self._loaders = loaders
        return self._loaders

    def __getitem__(self, name: str) -> Any:
        if name not in self._loaded:
            loaders = self._all()
            if name not in loaders:
                raise KeyError(name)
            self._loaded[name] = loaders[name]()
        return self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def __contains__(self, name: object) -> bool:
        return name in self._all()

    @property
    def builtin_names(self) -> list[str]:
        """rearank's own names, without those of other packages' entry points."""
        return list(self._builtins)

    def get_or_raise(self, name: str) -> Any:
        """``registry[name]``, else a one-line :class:`RearankError` listing the names there are."""
        if name not in self:
            raise RearankError(f"unknown {self.kind} {name!r}; choose one of: {', '.join(self)}")
        return self[name]


def _loader(point: EntryPoint, group: str) -> Callable[[], Any]:
    def load() -> Any:
        try:
            return point.load()
        except Exception as err:  # noqa: BLE001 - a broken plugin is named, whatever it raised
            raise RearankError(f"the {group} entry point {point.name!r} ({point.value}) failed to load: "
                               f"{type(err).__name__}: {err}") from None
    return load
