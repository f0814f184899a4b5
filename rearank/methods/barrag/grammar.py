"""The BAR-RAG selector's answer grammar, for constrained decoding: reasoning, then ``k`` distinct ids in
``<answer>``, in the format :func:`rearank.methods.barrag.parser.format_selection` writes and
:func:`rearank.methods.barrag.parser.parse_selection` reads."""

from __future__ import annotations

from rearank.grammar import AnswerGrammar, id_list_answer
from rearank.methods.barrag.prompt import SELECT_K


def selection_grammar(n_docs: int, k: int = SELECT_K) -> AnswerGrammar:
    """``<think>…</think>`` then ``<answer>[3], [5], …</answer>``: ``min(k, n_docs)`` distinct ids of 1..n_docs."""
    return id_list_answer(n_docs, reasoning=True, tags=True, count=min(k, n_docs), separator=", ")
