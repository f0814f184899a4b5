"""RRPO's published figures, printed beside a ``pointwise`` selector's run and beside any run whose own cards
publish none (Table 1, EM / F1: a Qwen2.5-7B reader over the top k of BM25's 100 DPR Wikipedia passages, of the
gte reranker's order of them, and of that reranker's once RRPO trained it; k = 3 for HotpotQA, 5 for AmbigNQ, §4.1)."""

from rearank.methods.card import Published, PublishedRow

TABLE1 = Published(
    paper="RRPO paper", measures=("em", "f1"),
    citation="Yuhang Wu, Xiangqing Shen, Fanfan Wang, et al. Optimizing RAG Rerankers with LLM Feedback via "
             "Reinforcement Learning. arXiv:2604.02091, Table 1",
    rows=tuple(PublishedRow(system, source, k, values) for source, k, by_system in (
        ("ambignq", 5, (("BM25", (20.33, 32.18)), ("BM25 + gte reranker", (35.51, 48.55)),
                        ("BM25 + gte reranker + RRPO", (36.56, 49.67)))),
        ("hotpotqa", 3, (("BM25", (24.23, 35.42)), ("BM25 + gte reranker", (28.24, 41.23)),
                         ("BM25 + gte reranker + RRPO", (30.03, 43.22)))),
    ) for system, values in by_system),
)
