"""Benchmark data: named packs under ``$REARANK_DATA``, building them (``rearank data fetch``), BM25 over a corpus.

- :mod:`rearank.data.packs`: pack names -> folders, and loading their topics, qrels, runs and documents
- :mod:`rearank.data.fetch`: build a missing pack on a connected machine (ir_datasets + a Pyserini index)
- :mod:`rearank.data.bm25`: Lucene BM25 through Anserini, with indexes cached under :func:`rearank.cache.cache_root`
- :mod:`rearank.data.java`: the in-process JVM behind BM25

This layer sits above :mod:`rearank.io` (file formats only) and below the rerankers, which never import it.
"""
