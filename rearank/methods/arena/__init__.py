"""ARENA as a method: the evidence-navigating generator's answer format with its prompt, grammar, parser and reward
(training and inference share them).

- :mod:`~rearank.methods.arena.prompt`: references as ``1. text`` lines, 10 paragraphs (20 for MuSiQue)
- :mod:`~rearank.methods.arena.grammar`: the answer grammar (constrained decoding)
- :mod:`~rearank.methods.arena.parser`: the one parser of ``<relevance>…</relevance><analysis>…</analysis><answer>…</answer>``
- :mod:`~rearank.methods.arena.reward`: format + accuracy + relevance + bonus, in verl's custom-reward signature
- :mod:`~rearank.methods.arena.reading`: how ``rag eval`` reads it (the first 10 references once) and scores it
  (answer, format, relevance-id accuracy); its card is :mod:`~rearank.methods.arena.card`
- :mod:`~rearank.methods.arena.figures`: the paper's Table 3, printed beside an ARENA run (the card's ``published``)
"""
