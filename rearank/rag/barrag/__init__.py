"""BAR-RAG over QA data: a selector's completion -> passage ids for ``rag eval`` (:mod:`~rearank.rag.barrag.select`) and
the training-data filter (:mod:`~rearank.rag.barrag.filtering`, :mod:`~rearank.rag.barrag.train_filter`). The method
itself (prompts, grammar, parsers, rewards, the reward's reader, the paper's figures) is :mod:`rearank.methods.barrag`.
"""
