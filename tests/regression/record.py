"""The recorded-output regression set: the embedded SmolLM2-135M on the hf backend, greedy, on CPU, over dl19.

Two cases: listwise (8 queries, their top 12 passages cut to 20 words, windows of 4 by 2: 40 windows, the
``rearank`` template, 32 new tokens: the start of its free reasoning, which moves with the slightest numerical
change) and a groupwise sample (2 queries, top 8 in groups of 4: 4 groups, ``grouprank-answer``, 48 new tokens).
Windows and passages are short so the replay takes minutes, not hours, on a shared CPU. ``dl19_smollm2_hf.jsonl.gz`` holds every window's prompt digest and exact answer (its trace, less the
latency), with the settings and what made it on the first line.

``python -m tests.regression.record`` replays the cases and prints the drift report against the record (exit 1
when anything changed); ``--overwrite`` re-records after an intended change (a new template, a dependency upgrade
whose new outputs were checked), printing what changed first. Without a record it writes the first one.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rearank.backends.base import Backend, SamplingSettings
from rearank.data import packs
from rearank.io.files import atomic_write
from rearank.run.config import RunConfig
from rearank.run.drift import DatasetRun, Drift, RunSide, compare_runs
from rearank.run.files import trace_record
from rearank.run.provenance import run_provenance
from rearank.types import Request, WindowTrace

RECORD = Path(__file__).with_name("dl19_smollm2_hf.jsonl.gz")
DATASET = "dl19"
#: Trace fields that vary from run to run and are not recorded.
UNRECORDED = ("latency_s",)


@dataclass(frozen=True)
class Case:
    """One recorded setting: its run configuration and how many dl19 queries it ranks."""

    name: str
    config: RunConfig
    queries: int


CASES = (
    Case("listwise", RunConfig(backend="hf", method="listwise", backend_options={"batch_size": 8},
                               options={"template": "rearank", "window": 4, "step": 2, "top_k": 12,
                                        "passage_budget": "20 words"},
                               sampling=SamplingSettings(max_new_tokens=32), batch_size=8), 8),
    Case("groupwise", RunConfig(backend="hf", method="groupwise", backend_options={"batch_size": 8},
                                options={"template": "grouprank-answer", "group_size": 4, "top_k": 8,
                                         "passage_budget": "20 words"},
                                sampling=SamplingSettings(max_new_tokens=48), batch_size=8), 2),
)


def requests(case: Case) -> list[Request]:
    """The case's dl19 queries, with the candidates its method reorders."""
    top_k = case.config.record()["top_k"]
    return packs.load_requests(dataset=DATASET, top_k=top_k, max_queries=case.queries)


def replay(backend: Backend | None = None) -> dict[str, dict[str, list[WindowTrace]]]:
    """Run every case on the model (minutes on a CPU); case -> qid -> its windows' traces. ``backend``: another
    one to replay on (the vLLM tier's), else the cases' own hf backend, loaded once and closed after."""
    own = backend is None
    backend = CASES[0].config.make_backend() if backend is None else backend  # the cases share it
    try:
        return {case.name: {result.query.qid: list(result.traces)
                            for result in case.config.engine(backend).rerank(requests(case), progress=False)}
                for case in CASES}
    finally:
        if own:
            backend.close()


def read_record(path: Path = RECORD) -> tuple[dict[str, Any], dict[str, dict[str, list[WindowTrace]]]]:
    """The record's header (settings and provenance) and its traces: case -> qid -> windows in order."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        header, *lines = (json.loads(line) for line in handle if line.strip())
    cases: dict[str, dict[str, list[WindowTrace]]] = {}
    for line in lines:
        case = line.pop("case")
        trace = WindowTrace(**{**line, "permutation": tuple(line["permutation"]), "latency_s": 0.0})
        cases.setdefault(case, {}).setdefault(trace.qid, []).append(trace)
    return header, cases


def record_lines(traces: dict[str, dict[str, list[WindowTrace]]]) -> list[str]:
    """The record's lines: its header (the cases' settings, what made it), then one line per window."""
    header = {"regression_set": 1, "dataset": DATASET,
              "cases": {c.name: {**c.config.record(), "queries": c.queries} for c in CASES},
              "provenance": run_provenance(CASES[0].config)}
    lines = [json.dumps(header, sort_keys=True)]
    for case, by_qid in traces.items():
        for trace in (t for windows in by_qid.values() for t in windows):
            fields = {k: v for k, v in trace_record(trace).items() if k not in UNRECORDED}
            lines.append(json.dumps({"case": case, **fields}, ensure_ascii=False, sort_keys=True))
    return lines


def drift(case: str, recorded: dict[str, list[WindowTrace]], replayed: dict[str, list[WindowTrace]],
          provenance: tuple[dict[str, Any], dict[str, Any]] = ({}, {})) -> Drift:
    """The drift report of ``replayed`` against ``recorded`` windows of ``case``."""
    method = {"method": next(c.config.method for c in CASES if c.name == case)}
    return compare_runs(RunSide(f"recorded {case} ({RECORD.name})", {case: DatasetRun({}, recorded)}, method,
                                provenance[0]),
                        RunSide(f"replayed {case}", {case: DatasetRun({}, replayed)}, method, provenance[1]))


def main(argv: list[str] | None = None) -> int:
    """Replay the cases and compare with the record; re-record only with ``--overwrite``."""
    parser = argparse.ArgumentParser(prog="python -m tests.regression.record", description=__doc__.splitlines()[0])
    parser.add_argument("--overwrite", action="store_true",
                        help="re-record after an intended change (prints what changed first)")
    parser.add_argument("--record", type=Path, default=RECORD, help=f"the record (default {RECORD})")
    args = parser.parse_args(argv)
    replayed = replay()
    if args.record.is_file():
        header, recorded = read_record(args.record)
        ours = run_provenance(CASES[0].config)
        drifts = [drift(name, recorded.get(name, {}), windows, (header.get("provenance", {}), ours))
                  for name, windows in replayed.items()]
        changed = [d for d in drifts if d.failures(same_answers=True)]
        print("\n\n".join(d.report() for d in drifts))
        if not changed:
            print(f"\nunchanged: every window matches {args.record}")
            return 0
        if not args.overwrite:
            print(f"\nFAIL: the replay differs from {args.record} (above); if the change is intended, re-record "
                  "with `python -m tests.regression.record --overwrite` and commit the record", file=sys.stderr)
            return 1
    with atomic_write(args.record) as handle:
        handle.write("\n".join(record_lines(replayed)) + "\n")
    print(f"recorded {sum(len(w) for c in replayed.values() for w in c.values())} windows in {args.record}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
