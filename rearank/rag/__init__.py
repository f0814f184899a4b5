"""RAG layer: QA items, answer metrics, readers, selectors, `rag eval`, and RRPO training.

- :mod:`rearank.rag.types`: :class:`Passage`, :class:`QAItem` (a QA item converts to a :class:`rearank.types.Request`)
- :mod:`rearank.rag.metrics`: answer normalisation, EM, token F1, Hit, answer recall, supporting-passage recall
- loaders live with the other formats in :mod:`rearank.io.qa`
"""

from rearank.rag.types import Passage, QAItem

__all__ = ["Passage", "QAItem"]
