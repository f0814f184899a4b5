"""The layout of a suite result folder, and reading it back.

::

    OUT/suite.json              settings of the run, datasets asked for, skipped datasets and why
    OUT/DATASET/run.trec        reranked run (TREC)
    OUT/DATASET/traces.jsonl    one line per query with every window trace
    OUT/DATASET/metrics.json    reranked and BM25 metrics, aggregate and per query (written last:
                                its presence means the dataset is done)
    OUT/DATASET/stats.json      efficiency: LLM calls, tokens, wall time, parse statuses
    OUT/report.md, OUT/ndcg10.png
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rearank.errors import FormatError, MissingDataError
from rearank.io.files import atomic_write

SUITE_FILE = "suite.json"
RUN_FILE = "run.trec"
TRACES_FILE = "traces.jsonl"
METRICS_FILE = "metrics.json"
STATS_FILE = "stats.json"
REPORT_FILE = "report.md"
PLOT_FILE = "ndcg10.png"

#: trec_eval names of the measures every metrics JSON holds, with the labels the report prints.
MEASURES = {
    "ndcg_cut_1": "nDCG@1",
    "ndcg_cut_5": "nDCG@5",
    "ndcg_cut_10": "nDCG@10",
    "recall_100": "R@100",
    "map_cut_100": "MAP@100",
}
MAIN_MEASURE = "ndcg_cut_10"


@dataclass
class DatasetResult:
    """What one dataset folder holds: its metrics JSON and, if written, its efficiency stats."""

    dataset: str
    metrics: dict[str, Any]
    stats: dict[str, Any] = field(default_factory=dict)

    def score(self, system: str = "rerank", measure: str = MAIN_MEASURE) -> float:
        """Aggregate ``measure`` of ``system`` (``rerank`` or ``bm25``)."""
        return float(self.metrics[system]["aggregate"][measure])

    def per_query(self, system: str = "rerank", measure: str = MAIN_MEASURE) -> dict[str, float]:
        """Per-query ``measure`` of ``system``."""
        return {qid: float(m[measure]) for qid, m in self.metrics[system]["per_query"].items()}


@dataclass
class SuiteResult:
    """A suite result folder: settings, finished datasets (in suite order) and skipped ones."""

    path: Path
    config: dict[str, Any]
    datasets: dict[str, DatasetResult]
    skipped: dict[str, str]

    @property
    def label(self) -> str:
        """The name of the evaluated system in tables: ``--label``, else the model, else the backend."""
        return str(self.config.get("label") or self.config.get("model") or self.config.get("backend"))


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically (temp file in the same folder, then rename)."""
    with atomic_write(path) as handle:
        handle.write(json.dumps(data, indent=1, sort_keys=False) + "\n")


def read_json(path: Path) -> Any:
    """Read a JSON file, naming the file when it is malformed."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise FormatError(path, err.lineno, f"not valid JSON ({err.msg})") from None


def load_suite(path: str | Path) -> SuiteResult:
    """Read a suite result folder written by ``python -m benchmark.run``."""
    path = Path(path)
    config_path = path / SUITE_FILE
    if not config_path.is_file():
        raise MissingDataError(f"{path} is not a suite result folder (no {SUITE_FILE}); run `python -m benchmark.run` first")
    config = read_json(config_path)
    datasets: dict[str, DatasetResult] = {}
    for name in config.get("datasets", []):
        metrics_path = path / name / METRICS_FILE
        if metrics_path.is_file():
            stats_path = path / name / STATS_FILE
            stats = read_json(stats_path) if stats_path.is_file() else {}
            datasets[name] = DatasetResult(name, read_json(metrics_path), stats)
    return SuiteResult(path, config, datasets, dict(config.get("skipped", {})))
