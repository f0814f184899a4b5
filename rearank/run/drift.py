"""Drift between two runs: per dataset the nDCG@10 delta with paired tests, then what differs, window by window.

Windows are matched by dataset, query id and position among the query's traces (the order the traces file holds
them: the order a method applies its windows, stable for the same settings). Each matched pair is one of:

* **prompt changed**: the prompts' digests differ although every earlier window of the query was answered the same
  (template, truncation or tokenizer drift: the same input was turned into another prompt);
* **answer changed**: the same prompt, another answer (model, weights or library drift);
* **after an earlier change**: an earlier window of the query was answered otherwise, so this window saw another
  order (its prompt differs as a consequence, not a cause). Only listwise windows depend on earlier answers; the
  groups of ``groupwise`` and the passages of ``pointwise`` do not, so there every differing window is counted by
  its own cause;
* **same**: same prompt, same answer.

A window only one run has (another window count) is counted apart; traces written before prompt digests were
recorded cannot tell a prompt change from an answer change and count as answer changed, with a note.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rearank.errors import RearankError
from rearank.measures.significance import Comparison, paired_comparison
from rearank.run.files import read_traces
from rearank.run.job import output_paths
from rearank.run.provenance import flatten
from rearank.types import WindowTrace

PROMPT, ANSWER, AFTER, SAME = "prompt changed", "answer changed", "after an earlier change", "same"
KINDS = (PROMPT, ANSWER, AFTER, SAME)
ONLY_A, ONLY_B = "only in A", "only in B"
#: Methods whose windows do not depend on the answers to earlier ones.
INDEPENDENT_WINDOWS = ("groupwise", "pointwise")
#: Recorded settings that differ between any two runs and say nothing about what made them.
_NOT_SETTINGS = ("output", "traces", "resume", "no_progress", "label", "provenance", "skipped", "resumed_queries")


@dataclass
class DatasetRun:
    """One dataset of a run: per-query scores (nDCG@10; empty without judgments) and traces by qid."""

    scores: dict[str, float] = field(default_factory=dict)
    traces: dict[str, list[WindowTrace]] = field(default_factory=dict)


@dataclass
class RunSide:
    """One side of a comparison: its datasets, its recorded settings and what made it (provenance)."""

    label: str
    datasets: dict[str, DatasetRun]
    settings: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class WindowChange:
    """A matched window that differs (or is in one run only): where it is and both traces."""

    kind: str
    dataset: str
    qid: str
    position: int
    a: WindowTrace | None
    b: WindowTrace | None


@dataclass
class Drift:
    """The comparison of B against A: per dataset the paired tests, the window counts by kind, the changed
    windows, and the settings and environments side by side."""

    a: RunSide
    b: RunSide
    comparisons: list[Comparison]
    counts: dict[str, int]
    changes: list[WindowChange]
    undigested: int = 0
    lone_queries: tuple[int, int] = (0, 0)  # queries with traces in A only, in B only

    def failures(self, tolerance: float | None = None, same_prompts: bool = False,
                 same_answers: bool = False) -> list[str]:
        """Why the comparison fails the checks asked: a dataset's |delta| above ``tolerance`` nDCG@10 points
        (x 100), a prompt changed (``same_prompts``), any window changed or unmatched (``same_answers``)."""
        out = [f"{c.dataset}: nDCG@10 delta {100 * c.delta:+.2f} points is outside the tolerance {tolerance:g}"
               for c in self.comparisons if tolerance is not None and abs(100 * c.delta) > tolerance + 1e-9]
        if same_prompts and self.counts[PROMPT]:
            out.append(f"{self.counts[PROMPT]} windows were sent another prompt (--same-prompts)")
        changed = sum(n for kind, n in self.counts.items() if kind != SAME)
        if same_answers and changed:
            out.append(f"{changed} windows differ (--same-answers)")
        return out

    def report(self, shown: int = 5) -> str:
        """The drift report as text: scores, window counts, the first ``shown`` changed windows of each kind,
        then the settings and environments that differ."""
        out = [f"A = {self.a.label}", f"B = {self.b.label}", ""]
        out += score_lines(self.comparisons) or [
            "nDCG@10: no scored query in common (a rerank run is scored with --qrels or --dataset)"]
        total = sum(self.counts.values())
        out += ["", f"windows: {total}: " + ", ".join(f"{self.counts[k]} {k}" for k in (*KINDS, ONLY_A, ONLY_B))]
        if any(self.lone_queries):
            out.append(f"note: {self.lone_queries[0]} queries have traces in A only and {self.lone_queries[1]} in B "
                       "only; their windows are not compared")
        if self.undigested:
            out.append(f"note: {self.undigested} windows have no prompt digest (traces of an earlier rearank): "
                       "their prompt changes count as answer changes")
        causes = {PROMPT: "template, truncation or tokenizer drift", ANSWER: "same prompt: model or library drift",
                  AFTER: "an earlier window of the query was answered otherwise",
                  ONLY_A: "B has fewer windows", ONLY_B: "A has fewer windows"}
        for kind, cause in causes.items():
            listed = [c for c in self.changes if c.kind == kind]
            if listed:
                out += ["", f"{kind} ({cause}): {len(listed)}, first {min(shown, len(listed))}:"]
                out += [window_line(change) for change in listed[:shown]]
        for title, a, b in (("settings", _settings(self.a.settings), _settings(self.b.settings)),
                            ("environment", flatten(self.a.provenance), flatten(self.b.provenance))):
            out += ["", *side_by_side(title, a, b)]
        return "\n".join(out)


def score_lines(rows: list[Comparison]) -> list[str]:
    """Per dataset: queries, nDCG@10 of A and B (x 100), delta, paired t-test and randomization p, B's wins/ties/
    losses."""
    if not rows:
        return []
    header = ("dataset", "queries", "nDCG@10 A", "nDCG@10 B", "delta", "t-test p", "randomization p", "B w/t/l")
    body = [(r.dataset, str(r.queries), f"{100 * r.mean_a:.2f}", f"{100 * r.mean_b:.2f}", f"{100 * r.delta:+.2f}",
             f"{r.t_p:.4f}", f"{r.randomization_p:.4f}", f"{r.wins}/{r.ties}/{r.losses}") for r in rows]
    widths = [max(len(row[i]) for row in (header, *body)) for i in range(len(header))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in (header, *body)]


def window_line(change: WindowChange) -> str:
    """One changed window: where, its span, and both prompt digests and answers (cut)."""
    trace = change.a or change.b
    assert trace is not None
    where = f"  {change.dataset} query {change.qid} window {change.position} [{trace.start}:{trace.end}]"
    if change.a is None or change.b is None:
        return where
    prompts = (f"prompt {change.a.prompt_digest or '?'} -> {change.b.prompt_digest or '?'}"
               if change.a.prompt_digest != change.b.prompt_digest else f"prompt {change.a.prompt_digest or '?'}")
    return f"{where}: {prompts}; answer {_cut(change.a.raw_output)} -> {_cut(change.b.raw_output)}"


def _cut(text: str, width: int = 60) -> str:
    return json.dumps(text if len(text) <= width else text[:width] + "...", ensure_ascii=False)


def _settings(record: Mapping[str, Any]) -> dict[str, str]:
    return flatten({k: v for k, v in record.items() if k not in _NOT_SETTINGS})


def side_by_side(title: str, a: Mapping[str, str], b: Mapping[str, str]) -> list[str]:
    """The keys whose values differ between ``a`` and ``b``, one line each, and how many are the same."""
    keys = [k for k in dict.fromkeys([*a, *b]) if a.get(k) != b.get(k)]
    same = len(set(a) | set(b)) - len(keys)
    if not keys:
        return [f"{title}: the same ({same} entries)" if same else f"{title}: not recorded"]
    width = max(len(k) for k in keys)
    return [f"{title}: {len(keys)} differ, {same} the same", f"  {'':<{width}}  A | B",
            *(f"  {k:<{width}}  {a.get(k, '-')} | {b.get(k, '-')}" for k in keys)]


def window_changes(dataset: str, a: Mapping[str, list[WindowTrace]], b: Mapping[str, list[WindowTrace]],
                   dependent: bool = True) -> tuple[list[WindowChange], int, int]:
    """Every window of the queries both runs hold, matched by qid and position; return the changes (every
    window that is not the same, in query order), how many are the same, and how many matched windows have no
    prompt digest. ``dependent``: a window's prompt depends on the answers to the query's earlier windows
    (listwise)."""
    changes: list[WindowChange] = []
    undigested = same = 0
    for qid in [q for q in a if q in b]:
        earlier = False  # an earlier window of this query was answered otherwise
        ta, tb = a[qid], b[qid]
        for position in range(max(len(ta), len(tb))):
            wa = ta[position] if position < len(ta) else None
            wb = tb[position] if position < len(tb) else None
            if wa is None or wb is None:
                changes.append(WindowChange(ONLY_B if wa is None else ONLY_A, dataset, qid, position, wa, wb))
                continue
            digested = bool(wa.prompt_digest and wb.prompt_digest)
            undigested += not digested
            prompt_same = wa.prompt_digest == wb.prompt_digest
            if prompt_same and wa.raw_output == wb.raw_output:
                same += 1
                continue
            kind = AFTER if earlier else PROMPT if digested and not prompt_same else ANSWER
            changes.append(WindowChange(kind, dataset, qid, position, wa, wb))
            earlier = dependent and (earlier or wa.raw_output != wb.raw_output)
    return changes, same, undigested


def compare_runs(a: RunSide, b: RunSide, permutations: int = 10000, seed: int = 0) -> Drift:
    """B against A on the datasets both hold (a single dataset each is paired whatever its name)."""
    pairs = [(name, name) for name in a.datasets if name in b.datasets]
    if not pairs and len(a.datasets) == len(b.datasets) == 1:
        pairs = [(next(iter(a.datasets)), next(iter(b.datasets)))]
    if not pairs:
        raise RearankError(f"{a.label} and {b.label} hold no dataset in common (A: {', '.join(a.datasets)}; "
                           f"B: {', '.join(b.datasets)})")
    dependent = a.settings.get("method") not in INDEPENDENT_WINDOWS
    comparisons, changes, undigested, lone = [], [], 0, [0, 0]
    counts = dict.fromkeys((*KINDS, ONLY_A, ONLY_B), 0)
    for name_a, name_b in pairs:
        da, db = a.datasets[name_a], b.datasets[name_b]
        row = paired_comparison(name_a, da.scores, db.scores, permutations, seed)
        if row is not None:
            comparisons.append(row)
        lone[0] += len(set(da.traces) - set(db.traces))
        lone[1] += len(set(db.traces) - set(da.traces))
        found, same, missing = window_changes(name_a, da.traces, db.traces, dependent)
        counts[SAME] += same
        undigested += missing
        for change in found:
            counts[change.kind] += 1
        changes += found
    return Drift(a, b, comparisons, counts, changes, undigested, (lone[0], lone[1]))


def read_stats(path: Path) -> dict[str, Any]:
    """A stats (or ``suite.json``) file's object; {} when it is absent, an error naming it when unreadable."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as err:
        raise RearankError(f"{path}: not a readable stats file ({err})") from None
    if not isinstance(data, dict):
        raise RearankError(f"{path}: not a stats file (a JSON object is expected)")
    return data


def load_rerank_run(run: Path, scores: Mapping[str, float] | None = None, traces: Path | None = None) -> RunSide:
    """A run of ``rearank rerank``: its traces (``<run>.traces.jsonl`` unless ``traces``) and stats
    (``<run>.stats.json``: settings and provenance), with its per-query ``scores`` when judged. Its one dataset is
    named by the recorded ``--dataset``, else by the run file."""
    traces_path, stats_path = output_paths(run, traces)
    if not traces_path.is_file():
        raise RearankError(f"{run}: no traces beside it ({traces_path}); compare needs the traces `rearank rerank` "
                           "writes (or give a benchmark result folder)")
    stats = read_stats(stats_path)
    config = stats.get("config") if isinstance(stats.get("config"), dict) else {}
    name = str(config.get("dataset") or run.name)
    return RunSide(str(run), {name: DatasetRun(dict(scores or {}), read_traces(traces_path))}, dict(config),
                   stats.get("provenance") if isinstance(stats.get("provenance"), dict) else {})
