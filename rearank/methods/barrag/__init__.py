"""BAR-RAG as a method: a boundary-aware evidence selector and its generator, each an answer format with its
prompt, grammar, parser and reward (training and inference share them).

- :mod:`~rearank.methods.barrag.prompt`: the selector and generator prompts (``Doc [i]:`` passages)
- :mod:`~rearank.methods.barrag.grammar`: the selector's answer grammar (constrained decoding)
- :mod:`~rearank.methods.barrag.parser`: the one parser of each output format, shared by inference and reward
- :mod:`~rearank.methods.barrag.reward`: verl rewards (async selector reward with a reader, generator reward)
- :mod:`~rearank.methods.barrag.reader`: the reward's reader behind an OpenAI-compatible URL, ``n`` samples a request
- :mod:`~rearank.methods.barrag.figures`: the paper's Table 1, printed beside a run of either card (``published``)

What runs it over QA data (selection for ``rag eval``, the filter) is in :mod:`rearank.rag.barrag`.
"""
