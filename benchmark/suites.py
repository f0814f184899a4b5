"""The benchmark suites of the Rearank paper and the layout of its result tables.

Dataset names are the pack names of :mod:`rearank.data.packs` (``dl19``, ``beir-scifact``,
``bright-biology``, ...). A suite spec is a suite name, ``all``, or a comma-separated list
of suite and dataset names.
"""

from __future__ import annotations

from dataclasses import dataclass

from rearank.data.packs import R2MED_TASKS
from rearank.errors import RearankError

TREC_DL = ("dl19", "dl20")
BEIR = (
    "beir-trec-covid",
    "beir-nfcorpus",
    "beir-dbpedia-entity",
    "beir-scifact",
    "beir-signal1m",
    "beir-trec-news",
    "beir-robust04",
)
BRIGHT = tuple(
    f"bright-{name}"
    for name in (
        "biology",
        "earth-science",
        "economics",
        "psychology",
        "robotics",
        "stackoverflow",
        "sustainable-living",
        "pony",
        "leetcode",
        "aops",
        "theoremqa-theorems",
        "theoremqa-questions",
    )
)

#: R2MED (GroupRank's Table II), its 8 tasks (rearank.data.packs.R2MED_TASKS); not part of ``all``.
R2MED = tuple(f"r2med-{task}" for task in R2MED_TASKS)

SUITES: dict[str, tuple[str, ...]] = {"trec-dl": TREC_DL, "beir": BEIR, "bright": BRIGHT, "r2med": R2MED}
SUITES["all"] = TREC_DL + BEIR + BRIGHT

#: Short column labels, as the paper prints them.
LABELS: dict[str, str] = {
    "dl19": "DL19",
    "dl20": "DL20",
    "beir-trec-covid": "Covid",
    "beir-nfcorpus": "NFCorpus",
    "beir-dbpedia-entity": "DBPedia",
    "beir-scifact": "SciFact",
    "beir-signal1m": "Signal",
    "beir-trec-news": "News",
    "beir-robust04": "Robust04",
    "bright-biology": "Bio.",
    "bright-earth-science": "Earth.",
    "bright-economics": "Econ.",
    "bright-psychology": "Psy.",
    "bright-robotics": "Rob.",
    "bright-stackoverflow": "Stack.",
    "bright-sustainable-living": "Sus.",
    "bright-pony": "Pony",
    "bright-leetcode": "LC.",
    "bright-aops": "AoPS",
    "bright-theoremqa-theorems": "TheoT.",
    "bright-theoremqa-questions": "TheoQ.",
}


@dataclass(frozen=True)
class Group:
    """A column average the paper reports: its key, label and member datasets."""

    key: str
    label: str
    datasets: tuple[str, ...]


GROUPS = {
    "trec-dl": Group("trec-dl", "TREC-DL (Avg)", TREC_DL),
    "beir": Group("beir", "BEIR (Avg)", BEIR),
    "bright": Group("bright", "BRIGHT (Avg)", BRIGHT),
}


@dataclass(frozen=True)
class TableLayout:
    """One paper table: its key in ``paper_figures.json``, columns, average columns, printed decimals."""

    key: str
    title: str
    columns: tuple[str, ...]
    averages: tuple[Group, ...]
    decimals: int


TABLES = (
    TableLayout("table1", "Table 1: TREC-DL and BEIR (nDCG@10)", TREC_DL + BEIR, (GROUPS["beir"],), 2),
    TableLayout("table2", "Table 2: BRIGHT (nDCG@10)", BRIGHT, (GROUPS["bright"],), 1),
)


def expand(spec: str) -> list[str]:
    """Turn a suite spec (``trec-dl``, ``all``, ``dl19,beir-scifact``, ...) into dataset names, in order.

    Names that are neither a suite nor a paper dataset are kept as given (any pack name works,
    e.g. ``dl21``); duplicates are dropped.
    """
    names: list[str] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        for name in SUITES.get(part, (part,)):
            if name not in names:
                names.append(name)
    if not names:
        raise RearankError(f"empty suite {spec!r}: give {', '.join(SUITES)} or a comma-separated list of datasets")
    return names
