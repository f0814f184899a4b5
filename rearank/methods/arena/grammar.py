"""ARENA's answer grammar, for constrained decoding: the three tags in order, as
:func:`rearank.methods.arena.parser.parse_arena` reads them strictly (``format_ok``)."""

from __future__ import annotations

from rearank.grammar import AnswerGrammar, Pattern

#: The longest short answer a constrained output may give, in characters.
MAX_ANSWER_CHARS = 200


def arena_grammar(n_references: int) -> AnswerGrammar:
    """``<relevance>[i, j]</relevance><analysis>…</analysis><answer>…</answer>`` with distinct-or-not reference ids
    of 1..n_references as a JSON list (the parser sorts and de-duplicates them), no ``<`` inside the tags, and a
    one-line answer; the model answers at once (no separate reasoning block: the analysis is its reasoning)."""
    ids = "|".join(str(i) for i in range(n_references, 0, -1))
    pattern = (rf"<relevance>\[(?:(?:{ids})(?:, (?:{ids}))*)?\]</relevance><analysis>[^<]+</analysis>"
               rf"<answer>[^<\n]{{1,{MAX_ANSWER_CHARS}}}</answer>")
    return AnswerGrammar(Pattern(pattern))
