"""ARENA over QA data: relevance-id accuracy in ``rag eval`` (:mod:`~rearank.rag.arena.evaluate`) and the figures.
The method itself (prompt, grammar, parser, reward) is :mod:`rearank.methods.arena`.
"""
