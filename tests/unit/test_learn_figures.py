"""The committed ``docs/figures/train_learn.json`` against its committed per-item outcomes: every evaluation's
figures and both paired tests recompute from the outcomes files, as docs/training.md tells readers they can."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from recipes.learn import report
from recipes.learn.run import file_name

FIGURES = Path(__file__).resolve().parents[2] / "docs" / "figures"


def entries() -> list:
    """A test case (entry, outcomes file; its id the run's label) for every run on record that has its per-item
    outcomes beside the JSON."""
    tasks = json.loads((FIGURES / "train_learn.json").read_text(encoding="utf-8"))["tasks"]
    found = []
    for name, entry in tasks.items():
        files = [(entry, f"train_learn_{file_name(name)}_outcomes.jsonl.gz")]
        files += [(run, run["outcomes_file"]) for run in entry.get("earlier_attempts", []) if "outcomes_file" in run]
        for run, outcomes in files:
            if "evaluations" in run and (FIGURES / outcomes).is_file():
                found.append(pytest.param(run, FIGURES / outcomes, id=f"{name} attempt {run.get('attempt', 'last')}"))
    return found


def by_evaluation(path: Path) -> dict[tuple[str, int], list[dict]]:
    runs: dict[tuple[str, int], list[dict]] = {}
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            runs.setdefault((row["stage"], row["step"]), []).append(
                {**row, "right": row["answer"] == row["gold"], "greedy_agrees": True})
    return runs


def test_the_record_holds_runs_with_outcomes():
    labels = [case.id for case in entries()]
    assert "relevance, 2 passages attempt 2" in labels and "relevance attempt last" in labels


@pytest.mark.parametrize(("entry", "path"), entries())
def test_the_figures_recompute_from_the_outcomes(entry, path):
    label = path.name
    runs = by_evaluation(path)
    size = entry["plan"]["settings"]["set_size"]
    assert sorted(runs) == sorted((e["stage"], e["step"]) for e in entry["evaluations"])
    for recorded in entry["evaluations"]:
        items = runs[(recorded["stage"], recorded["step"])]
        again = report.figures(recorded["stage"], recorded["step"], items, size=size)
        for key in ("items", "top1", "answer_share_by_position", "accuracy_by_position"):
            assert again[key] == recorded[key], (label, recorded["stage"], recorded["step"], key)
    tests = {"warm_start_test": (("base", 0), ("warm start", 0))}
    if "paired_test" in entry:
        last = max(step for stage, step in runs if stage == "grpo")
        tests["paired_test"] = (("warm start", 0), ("grpo", last))
    for key, (before, after) in tests.items():
        if key in entry:
            again = report.paired(runs[before], runs[after], entry[key]["baseline"], entry[key]["candidate"])
            assert again == entry[key], (label, key)
