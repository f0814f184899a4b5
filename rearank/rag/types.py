"""Frozen records of the RAG layer: a candidate passage and a QA item (question, gold answers, passages).

They are defined in :mod:`rearank.types` (the bottom layer, so that :mod:`rearank.io.qa` can build them without
importing the RAG package) and re-exported here.
"""

from __future__ import annotations

from rearank.types import Passage, QAItem

__all__ = ["Passage", "QAItem"]
