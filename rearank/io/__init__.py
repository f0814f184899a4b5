"""Readers and writers for the standard IR formats; a ``.gz`` suffix means gzip, in and out.

- :mod:`rearank.io.trec`: TREC runs and qrels
- :mod:`rearank.io.topics`: ``qid TAB text`` topics
- :mod:`rearank.io.docs`: ``docid TAB text`` documents
- :mod:`rearank.io.beir`: BEIR ``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``
- :mod:`rearank.io.requests_jsonl`: RankLLM request JSONL (Anserini ``-outputRerankerRequests``)
- :mod:`rearank.io.outputs`: the output guard (an output is no input nor another output; one writer at a time)
- :mod:`rearank.io.files`: the shared plumbing (gzip by suffix, numbered lines, atomic writes)
- :mod:`rearank.io.qa`: QA items (HotpotQA, 2WikiMultihopQA, MuSiQue, DPR ``ctxs``, FlashRAG JSONL)

Malformed input raises :class:`rearank.errors.FormatError` naming the file and line; every writer writes a
temporary file beside the target and renames it into place.
"""
