"""rearank: listwise reasoning LLM rerankers trained with reinforcement learning.

``from rearank import Reranker`` is the Python face (:mod:`rearank.api`); it loads on first use, so importing
``rearank.types`` or the CLI stays light. Importing the package sets the CPU defaults (:mod:`rearank.machine.startup`).
"""

from typing import Any

from rearank.machine import startup
from rearank.types import Candidate, Query, Request, Result, WindowTrace

__all__ = ["Candidate", "Query", "Ranking", "Request", "Reranker", "Result", "WindowTrace"]
__version__ = "0.1.0"
_FACE = {"Reranker", "Ranking"}

startup.apply()  # before anything imports torch: OpenMP reads its settings once, when torch loads it


def __getattr__(name: str) -> Any:
    """Load the face (:mod:`rearank.api`) when ``Reranker`` or ``Ranking`` is first asked for."""
    if name in _FACE:
        import rearank.api

        return getattr(rearank.api, name)
    raise AttributeError(f"module 'rearank' has no attribute {name!r}")
