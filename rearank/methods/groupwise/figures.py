"""GroupRank's published nDCG@10 figures (Tables I and II of its paper), which ``rearank benchmark --expect
published`` checks a suite of its released checkpoints against; both rerank DIVER-Retriever-4B's top 100."""

from rearank.methods.card import Checkpoint, figures

BRIGHT = ("bright-biology", "bright-earth-science", "bright-economics", "bright-psychology", "bright-robotics",
          "bright-stackoverflow", "bright-sustainable-living", "bright-leetcode", "bright-pony", "bright-aops",
          "bright-theoremqa-questions", "bright-theoremqa-theorems", "bright")
R2MED = ("r2med-biology", "r2med-bioinformatics", "r2med-medical-sciences", "r2med-medxpertqa-exam",
         "r2med-medqa-diag", "r2med-pmc-treatment", "r2med-pmc-clinical", "r2med-iiyi-clinical", "r2med")
CITATION = ("Duolin Sun, Meixiu Long, Dan Yang, et al. GroupRank: A Groupwise Reranking Paradigm Driven by "
            "Reinforcement Learning. arXiv:2511.11653, Tables I (BRIGHT) and II (R2MED)")
FIRST_STAGE = ("DIVER-Retriever-4B's top 100 (BRIGHT: retrieved with GPT-4-rewritten queries; R2MED: with the "
               "original queries)")


def _checkpoint(size: str, bright: tuple[float, ...], r2med: tuple[float, ...]) -> Checkpoint:
    return Checkpoint(name=f"GroupRank-{size}", model=f"AQ-MedAI/Diver-GroupRank-{size}", citation=CITATION,
                      first_stage=FIRST_STAGE, figures=figures(dict(zip(BRIGHT + R2MED, bright + r2med, strict=True))))


GROUPRANK_7B = _checkpoint(
    "7B", (56.85, 53.06, 35.94, 48.75, 36.65, 35.05, 43.99, 15.48, 15.53, 10.64, 41.45, 46.40, 36.65),
    (56.66, 65.43, 64.16, 27.26, 30.54, 64.63, 43.17, 30.86, 47.84))
GROUPRANK_32B = _checkpoint(
    "32B", (59.48, 56.49, 40.12, 50.46, 38.36, 39.16, 43.32, 19.48, 16.32, 13.34, 46.39, 47.91, 39.24),
    (59.48, 69.71, 66.28, 28.77, 41.47, 67.59, 52.23, 32.74, 52.28))
