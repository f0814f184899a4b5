"""The pointwise relevance question: one passage and one query, answered yes or no.

The Pointwise method asks it of an LLM (:mod:`rearank.methods.pointwise.method`), and the ``causal-yes`` scorer
(:mod:`rearank.backends.scorer`) scores the log-odds of "yes" after the same words, so both read one prompt.
"""

from __future__ import annotations

from rearank.prompts.builder import titled

#: The relevance question asked after the query and the document.
QUESTION = "Is the document relevant to the query? Answer yes or no."
#: What the question asks on top with reasoning on.
REASONING = ("First think it over inside <think> </think>: what the query asks and what the document offers. Then "
             "write only yes or no inside <answer> </answer>.")


def relevance_passage(title: str, text: str) -> str:
    """A passage as the question shows it: ``title: text`` (the text alone without a title)."""
    return titled(title, text, "{title}: {text}")


def relevance_text(query: str, passage: str, reasoning: bool = False) -> str:
    """The question about ``passage`` (already titled) for ``query`` (with ``reasoning``: asking for the reasoning
    first, :data:`REASONING`)."""
    return f"Query: {query}\nDocument: {passage}\n{QUESTION}" + (f" {REASONING}" if reasoning else "")
