"""The published nDCG@10 figures of listwise checkpoints, which ``rearank benchmark --expect published`` checks a
suite against: Rearank-7B (its paper, Tables 1 and 2: BM25 top 100), ReasonRank-7B (its paper, Table 1: ReasonIR-8B
top 100 on BRIGHT) and RankZephyr-7B (RankLLM's reproduction band on DL20: SPLADE++ ED top 100)."""

from rearank.methods.card import Checkpoint, figures

REARANK_7B = Checkpoint(
    name="Rearank-7B", model="le723z/Rearank-7B",
    citation="Le Zhang, Bo Wang, Xipeng Qiu, Siva Reddy, Aishwarya Agrawal. Rearank: Reasoning Re-ranking Agent via "
             "Reinforcement Learning. EMNLP 2025, arXiv:2505.20046, Tables 1 and 2",
    figures=figures({
        "dl19": 74.16, "dl20": 70.00, "beir-trec-covid": 81.28, "beir-nfcorpus": 35.20,
        "beir-dbpedia-entity": 45.23, "beir-scifact": 75.02, "beir-signal1m": 36.00, "beir-trec-news": 51.88,
        "beir-robust04": 57.49, "beir": 54.59,
        "bright-biology": 23.4, "bright-earth-science": 27.4, "bright-economics": 18.5, "bright-psychology": 24.2,
        "bright-robotics": 17.4, "bright-stackoverflow": 16.3, "bright-sustainable-living": 25.1, "bright-pony": 8.0,
        "bright-leetcode": 27.0, "bright-aops": 7.4, "bright-theoremqa-theorems": 9.5,
        "bright-theoremqa-questions": 7.9, "bright": 17.7,
    }),
)

REASONRANK_7B = Checkpoint(
    name="ReasonRank-7B", model="liuwenhan/reasonrank-7B",
    citation="W. Liu, X. Ma, W. Sun, Y. Zhu, Y. Li, D. Yin, Z. Dou. ReasonRank: Empowering Passage Ranking with Strong "
             "Reasoning Ability. arXiv:2508.07050, Table 1",
    first_stage="ReasonIR-8B's top 100, retrieved with BRIGHT's GPT-4 reasoning queries (reranked with the "
                "original queries)",
    figures=figures({
        "bright-biology": 56.70, "bright-earth-science": 47.75, "bright-economics": 35.05,
        "bright-psychology": 47.77, "bright-robotics": 31.22, "bright-stackoverflow": 32.47,
        "bright-sustainable-living": 40.87, "bright-pony": 24.95, "bright-leetcode": 23.17, "bright-aops": 7.68,
        "bright-theoremqa-theorems": 41.80, "bright-theoremqa-questions": 39.49, "bright": 35.74,
    }),
)

RANKZEPHYR_7B = Checkpoint(
    name="RankZephyr-7B", model="castorini/rank_zephyr_7b_v1_full",
    citation="RankLLM's reproduction range for RankZephyr on DL20, with its rank_zephyr template (castorini/rank_llm, "
             "https://github.com/castorini/rank_llm/pull/410)",
    first_stage="SPLADE++ EnsembleDistil's top 100",
    figures=figures({"dl20": (81.44, 82.01)}),
)
