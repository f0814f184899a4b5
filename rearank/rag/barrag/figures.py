"""BAR-RAG's published figures, to print beside ours (Table 1: average EM over 7 QA sets, Qwen2.5-7B)."""

TABLE1_AVG_EM_QWEN25_7B: dict[str, float] = {
    "RAG": 26.9,
    "RAG + reranker": 28.0,
    "RAG SFT": 31.8,
    "BAR-RAG iteration 1": 37.2,
    "BAR-RAG iteration 2": 38.8,
    "BAR-RAG iteration 3": 39.1,
}
