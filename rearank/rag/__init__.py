"""RAG layer: QA items, answer metrics, readers, selectors, `rag eval`, and RRPO training.

- QA items are :class:`rearank.types.QAItem` with :class:`rearank.types.Passage` candidates (a QA item converts to a
  :class:`rearank.types.Request`)
- :mod:`rearank.measures.answers`: answer normalisation, EM, token F1, Hit, answer recall, supporting-passage recall
- :mod:`rearank.measures.answers` also holds DPR's has-answer rule
- :mod:`rearank.rag.readers`: LLM readers (any backend; ``plain``/``rrpo``/``barrag``/``arena`` templates), oracle
  and noisy oracle, a reader spread over several servers
- :mod:`rearank.prompts.qa_files`: the RAG prompts as YAML files (``rearank/rag/templates``)
- :mod:`rearank.rag.corpus`, :mod:`rearank.rag.retrieval`: a corpus pooled from QA files; open retrieval (BM25 top-k
  of a corpus as each question's candidates, gold matched to corpus passages, cached per question)
- :mod:`rearank.rag.judge`: LLM-as-a-judge (ARENA App. C.3)
- :mod:`rearank.qa.oracle`: the one answering rule of the oracle readers and the ``qa-oracle`` backend
- the resumable logs (``rag eval`` items, the BAR-RAG filter log, the response cache) are read and appended by
  :mod:`rearank.io.jsonl_log`, the one reader of such logs
- :mod:`rearank.qa.truth`: ground-truth decoding shared by the BAR-RAG and ARENA rewards
- readers and the judge cache greedy responses by (model, prompt, sampling): :mod:`rearank.backends.cache`
- :mod:`rearank.rag.selectors`: ``none``, ``oracle``, ``bm25``, ``listwise:M``, ``pointwise:M``, ``barrag:M`` behind a registry
- :mod:`rearank.rag.evaluate`: ``rag eval`` (per-item JSONL, metrics, table, resume) and paired comparison
- :mod:`rearank.rag.config`: ``rag eval``'s typed settings (:class:`~rearank.rag.config.RagConfig`) and open
  retrieval's (:class:`~rearank.rag.config.RetrievalSettings`), checked before anything loads
- :mod:`rearank.rag.rrpo`: RRPO's formulas, trainer (Algorithm 1) and data parallelism
- loaders live with the other formats in :mod:`rearank.io.qa`
"""
