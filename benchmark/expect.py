"""Reproduction bands: a finished suite against the published nDCG@10 figures of the checkpoint it ran
(``rearank benchmark --expect published|FILE``).

The figures are the method cards' (:class:`rearank.methods.card.Checkpoint`), or those of a JSON file of the same
shape::

    {"name": "my-reranker", "model": "org/my-reranker", "citation": "our run of 2026-01-05",
     "first_stage": null, "figures": {"dl19": 71.2, "dl20": [69.5, 70.4], "beir": 50.1}}

(or ``{"checkpoints": [...]}`` with several). A figure is one value or a ``[low, high]`` band; its dataset is a pack
name or a suite name (``trec-dl``, ``beir``, ``bright``, ``r2med``: the mean over the suite's datasets). A figure is
*within* when the measured nDCG@10 x 100 lies in the band widened by the tolerance on both sides.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.results import SuiteResult
from benchmark.suites import SUITES
from benchmark.tables import MISSING, fmt, markdown_table
from rearank.data import packs
from rearank.errors import FormatError, RearankError
from rearank.methods.card import RANK, Checkpoint, cards, figures

#: ``--expect``'s value that names the method cards' published figures.
PUBLISHED = "published"
#: Default ``--tolerance`` in nDCG@10 points (docs/reproducibility.md says why).
DEFAULT_TOLERANCE = 1.0
WITHIN, OUTSIDE, NOT_RUN, NO_FIGURE = "within", "outside", "not run", "no published figure"
#: What a suite reranks without ``--first-stage``.
BM25 = "the packs' BM25 top 100"


def published() -> list[Checkpoint]:
    """The checkpoints of every ranking card, in card order."""
    return [checkpoint for card in cards(RANK) for checkpoint in card.checkpoints]


def load_file(path: Path) -> list[Checkpoint]:
    """The checkpoints of an ``--expect`` JSON file (one object, or ``{"checkpoints": [...]}``)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RearankError(f"--expect {path}: no such file; give `published` or a JSON file of figures") from None
    except json.JSONDecodeError as err:
        raise FormatError(path, err.lineno, f"not valid JSON ({err.msg})") from None
    entries = data.get("checkpoints", [data]) if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise FormatError(path, None, 'expected an object with "name" and "figures", or {"checkpoints": [...]}')
    return [_checkpoint(path, i, entry) for i, entry in enumerate(entries)]


def _checkpoint(path: Path, index: int, entry: Any) -> Checkpoint:
    where = f"checkpoint {index + 1}"
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
        raise FormatError(path, None, f'{where}: expected an object with a "name" string')
    where = f"checkpoint {entry['name']!r}"
    values = entry.get("figures")
    if not isinstance(values, dict) or not values:
        raise FormatError(path, None, f'{where}: "figures" must map datasets to a value or a [low, high] band')
    bands = {}
    for dataset, value in values.items():
        if dataset not in packs.REGISTRY and dataset not in SUITES:
            raise FormatError(path, None, f"{where}: unknown dataset {dataset!r}; give a pack name (rearank data "
                              f"list) or a suite ({', '.join(s for s in SUITES if s != 'all')})")
        band = value if isinstance(value, list) else [value]
        if not 1 <= len(band) <= 2 or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in band):
            raise FormatError(path, None, f"{where}, {dataset}: {value!r} is not a number or a [low, high] band")
        bands[dataset] = (float(band[0]), float(band[-1]))
    try:
        return Checkpoint(name=entry["name"], model=str(entry.get("model") or entry["name"]),
                          citation=str(entry.get("citation") or path), first_stage=entry.get("first_stage"),
                          figures=figures(bands))
    except RearankError as err:
        raise FormatError(path, None, str(err)) from None


def _key(name: str) -> str:
    """A model's name as matched: its last path part (a hub id's or a folder's), case-insensitive."""
    return Path(name.rstrip("/")).name.lower()


def find(checkpoints: Sequence[Checkpoint], model: str | None, flag: str) -> Checkpoint:
    """The checkpoint named ``model`` (its name, its hub id, or a folder of that name); else a one-line error that
    lists the known ones."""
    if model:
        for checkpoint in checkpoints:
            if _key(model) in (_key(checkpoint.name), _key(checkpoint.model)):
                return checkpoint
    known = ", ".join(f"{c.name} ({c.model})" if c.model != c.name else c.name for c in checkpoints)
    what = f"model {model!r}" if model else "the suite's model (none recorded: the backend's default)"
    raise RearankError(f"{flag} has no figures for {what}; known: {known}; name one with --expect-model NAME")


def expected(spec: str, model: str | None) -> Checkpoint:
    """The checkpoint ``--expect spec`` checks a suite of ``model`` against."""
    if spec == PUBLISHED:
        return find(published(), model, "--expect published")
    return find(load_file(Path(spec)), model, f"--expect {spec}")


@dataclass(frozen=True)
class Line:
    """One row of the check: a dataset (or suite average), what was measured, the figure, and the verdict."""

    dataset: str
    measured: float | None
    band: tuple[float, float] | None
    verdict: str
    note: str = ""

    @property
    def delta(self) -> float | None:
        """Measured minus the nearest end of the band (0 inside it)."""
        if self.measured is None or self.band is None:
            return None
        low, high = self.band
        return self.measured - low if self.measured < low else max(self.measured - high, 0.0)


def _measured(suite: SuiteResult, dataset: str) -> tuple[float | None, str]:
    """nDCG@10 x 100 of a finished dataset, or the mean over a suite's datasets when all are finished."""
    if dataset in suite.datasets:
        return 100 * suite.datasets[dataset].score(), ""
    members = SUITES.get(dataset)
    if not members or dataset == "all":
        return None, ""
    done = [suite.datasets[d].score() for d in members if d in suite.datasets]
    if len(done) < len(members):
        return None, f"{len(done)}/{len(members)} datasets finished"
    return 100 * sum(done) / len(done), f"mean of {len(members)}"


def _asked(suite: SuiteResult, dataset: str) -> bool:
    asked = suite.config.get("datasets", [])
    return dataset in asked or any(d in asked for d in SUITES.get(dataset, ()) if dataset != "all")


def check(suite: SuiteResult, checkpoint: Checkpoint, tolerance: float = DEFAULT_TOLERANCE) -> list[Line]:
    """One line per figure the suite asked for (a dataset, or a suite average whose datasets it ran), then one per
    dataset of the suite with no figure."""
    lines = []
    for figure in checkpoint.figures:
        if not _asked(suite, figure.dataset):
            continue
        value, note = _measured(suite, figure.dataset)
        band = (figure.low, figure.high)
        if value is None:
            verdict = NOT_RUN
        else:
            verdict = WITHIN if figure.low - tolerance - 1e-9 <= value <= figure.high + tolerance + 1e-9 else OUTSIDE
        lines.append(Line(figure.dataset, value, band, verdict, note))
    covered = {f.dataset for f in checkpoint.figures}
    for dataset in suite.config.get("datasets", []):
        if dataset not in covered:
            value = 100 * suite.datasets[dataset].score() if dataset in suite.datasets else None
            lines.append(Line(dataset, value, None, NO_FIGURE))
    return lines


def _band(band: tuple[float, float] | None) -> str:
    if band is None:
        return MISSING
    low, high = band
    return fmt(low) if low == high else f"{fmt(low)}–{fmt(high)}"


def report(suite: SuiteResult, checkpoint: Checkpoint, lines: Sequence[Line], tolerance: float) -> str:
    """The check as printed: what was checked against what, the table, and the counts."""
    ours = suite.config.get("first_stage") or BM25
    out = [(f"Reproduction check of {suite.path} against {checkpoint.name} ({checkpoint.citation}), "
            f"nDCG@10 x 100, tolerance ±{tolerance:g} points"),
           f"published over {checkpoint.first_stage or BM25}; this suite reranked {ours}"]
    if suite.config.get("max_queries"):
        out.append(f"this suite ran the first {suite.config['max_queries']} queries of each dataset only: "
                   "its figures are not comparable to the published ones")
    delta = [MISSING if line.delta is None else f"{line.delta:+.2f}" for line in lines]
    out += ["", markdown_table(["Dataset", "Measured", "Published", "Delta", "Verdict"], [
        [line.dataset, fmt(line.measured), _band(line.band), d, f"{line.verdict} ({line.note})" if line.note
         else line.verdict] for line, d in zip(lines, delta)]), ""]
    counts = {v: sum(line.verdict == v for line in lines) for v in (WITHIN, OUTSIDE, NOT_RUN, NO_FIGURE)}
    out.append(", ".join(f"{n} {v}" for v, n in counts.items() if n) or "nothing to compare")
    if not counts[WITHIN] and not counts[OUTSIDE]:
        out.append(f"no published figure of {checkpoint.name} was compared: run its datasets, or name another "
                   "checkpoint with --expect-model")
    return "\n".join(out)


def outside(lines: Sequence[Line]) -> bool:
    """Whether any figure is outside its band."""
    return any(line.verdict == OUTSIDE for line in lines)
