"""ARENA: the evidence-navigating generator (prompt, output parser, reward, relevance-id accuracy).

- :mod:`~rearank.rag.arena.prompt`: references as ``1. text`` lines, 10 paragraphs (20 for MuSiQue)
- :mod:`~rearank.rag.arena.parser`: the one parser of ``<relevance>…</relevance><analysis>…</analysis><answer>…</answer>``
- :mod:`~rearank.rag.arena.reward`: format + accuracy + relevance + bonus, in verl's custom-reward signature
"""
