"""ARENA's published figures, to print beside ours (Table 3: EM / F1 / LLM-judge accuracy, 0-1 scale)."""

#: system -> dataset -> (EM, F1, LLM-judge)
TABLE3: dict[str, dict[str, tuple[float, float, float]]] = {
    "ARENA-Qwen-7B": {"hotpotqa": (0.628, 0.762, 0.812), "2wiki": (0.660, 0.752, 0.786),
                      "musique": (0.400, 0.520, 0.508)},
    "Qwen2.5-7B": {"hotpotqa": (0.484, 0.628, 0.660), "2wiki": (0.334, 0.424, 0.412),
                   "musique": (0.252, 0.354, 0.306)},
}
