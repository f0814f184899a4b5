"""Engines for tests: a method with its settings on a backend, in one call."""

from __future__ import annotations

from typing import Any

from rearank.backends.base import AUTO, Backend, SamplingSettings
from rearank.engine import Engine
from rearank.methods import Groupwise, Listwise


def listwise(backend: Backend, *, settings: SamplingSettings | None = None, batch_size: int = 32,
             in_flight: bool | None = None, concurrency: int | str = AUTO, **method: Any) -> Engine:
    """The engine of :class:`Listwise` (``method``: its settings) on ``backend``."""
    return Engine(backend, Listwise(**method), settings, batch_size=batch_size, in_flight=in_flight,
                  concurrency=concurrency)


def groupwise(backend: Backend, *, settings: SamplingSettings | None = None, batch_size: int = 32,
              in_flight: bool | None = None, concurrency: int | str = AUTO, **method: Any) -> Engine:
    """The engine of :class:`Groupwise` (``method``: its settings) on ``backend``."""
    return Engine(backend, Groupwise(**method), settings, batch_size=batch_size, in_flight=in_flight,
                  concurrency=concurrency)
