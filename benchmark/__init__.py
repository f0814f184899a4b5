"""Benchmark evaluation of rerankers as in the Rearank paper: suite runner, paper tables, plots, paired tests.

Entry points: ``python -m benchmark.run`` (= ``rearank benchmark``), ``python -m benchmark.report``,
``python -m benchmark.compare`` and ``python -m benchmark.analyses``.
"""
