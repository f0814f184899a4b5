"""ARENA's published figures (:mod:`~rearank.rag.arena.figures`), beside ``rag eval``'s table. The method itself
(prompt, grammar, parser, reward, how ``rag eval`` reads and scores it) is :mod:`rearank.methods.arena`.
"""
