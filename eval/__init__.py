"""Benchmark evaluation of rerankers as in the Rearank paper: suite runner, paper tables, plots, paired tests.

Entry points: ``python -m eval.run`` (= ``rearank benchmark``), ``python -m eval.report``,
``python -m eval.compare`` and ``python -m eval.analyses``.
"""
