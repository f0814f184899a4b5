"""Reranking methods beyond the listwise driver: :mod:`rearank.methods.pointwise` (scorer policies, RRPO)."""
