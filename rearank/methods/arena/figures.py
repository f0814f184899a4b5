"""ARENA's published figures, printed beside an ARENA run (Table 3, Qwen2.5-7B-Instruct and ARENA-Qwen-7B over the
datasets' own paragraphs: EM / F1 / LLM judge by GPT-4o 2024-11-20, as fractions)."""

from rearank.methods.card import Published, PublishedRow


def _rows(system: str, by_source: dict[str, tuple[float, float, float]]) -> tuple[PublishedRow, ...]:
    return tuple(PublishedRow(system, source, None, values) for source, values in by_source.items())


#: Each system's rows with its sets by name, the order ``rag eval`` lists a run's sets in.
TABLE3 = Published(
    paper="ARENA paper (Table 3)", measures=("em", "f1", "judge"), label="{paper}, {system}, {source}", scale=100,
    notes={"judge": "GPT-4o"},
    citation="Jingyi Ren, Yekun Xu, Xiaolong Wang, Weitao Li, Weizhi Ma, Yang Liu. Effective and Transparent RAG: "
             "Adaptive-Reward Reinforcement Learning for Decision Traceability. arXiv:2505.13258v1 (code and models: "
             "github.com/ren258/ARENA), Table 3",
    rows=(*_rows("ARENA-Qwen-7B", {"2wiki": (0.660, 0.752, 0.786), "hotpotqa": (0.628, 0.762, 0.812),
                                   "musique": (0.400, 0.520, 0.508)}),
          *_rows("Qwen2.5-7B", {"2wiki": (0.334, 0.424, 0.412), "hotpotqa": (0.484, 0.628, 0.660),
                                "musique": (0.252, 0.354, 0.306)})),
)
