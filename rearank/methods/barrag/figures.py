"""BAR-RAG's published figures, printed beside a run of its selector or generator (Table 1, Qwen2.5-7B-Instruct:
average EM over its 7 QA sets, each read over the top 5 passages)."""

from rearank.methods.card import Published, PublishedRow

TABLE1 = Published(
    paper="BAR-RAG paper (Table 1, average EM of 7 QA sets, Qwen2.5-7B)", measures=("em",), label="{paper}: {system}",
    citation="Jiashuo Sun, Pengcheng Jiang, Saizhuo Wang, et al. Rethinking the Reranker: Boundary-Aware Evidence "
             "Selection for Robust Retrieval-Augmented Generation. arXiv:2602.03689 (code: github.com/GasolSun36/BAR-RAG), "
             "Table 1",
    rows=tuple(PublishedRow(system, None, 5, (em,)) for system, em in (
        ("RAG", 26.9), ("RAG + reranker", 28.0), ("RAG SFT", 31.8), ("BAR-RAG iteration 1", 37.2),
        ("BAR-RAG iteration 2", 38.8), ("BAR-RAG iteration 3", 39.1))),
)
