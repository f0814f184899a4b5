"""BAR-RAG: a boundary-aware evidence selector and its generator (prompts, output parsers, rewards, selection).

- :mod:`~rearank.rag.barrag.prompt`: the selector and generator prompts (``Doc [i]:`` passages)
- :mod:`~rearank.rag.barrag.parser`: the one parser of each output format, shared by inference and reward
- :mod:`~rearank.rag.barrag.reward`: verl rewards (async selector reward with a reader, generator reward)
- :mod:`~rearank.rag.barrag.reader`: the reader behind an OpenAI-compatible URL, ``n`` samples per request
- :mod:`~rearank.rag.barrag.select`: a selector's completion -> passage ids (for ``rag eval``)
"""
