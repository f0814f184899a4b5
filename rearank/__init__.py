"""rearank: listwise reasoning LLM rerankers trained with reinforcement learning."""

from rearank.types import Candidate, Query, Request, Result, WindowTrace

__all__ = ["Candidate", "Query", "Request", "Result", "WindowTrace"]
__version__ = "0.1.0"
