"""RRPO (ReRanking Preference Optimization, arXiv 2604.02091): a pointwise scorer trained by PPO with the reader's
answer quality as reward. :mod:`~rearank.rag.rrpo.objective` holds the formulas, :mod:`~rearank.rag.rrpo.trainer`
the plain PyTorch loop."""
