"""A rerank run written to files: the code path shared by ``rearank rerank`` and :meth:`rearank.Reranker.rerank_run`.

Finished queries are appended to the TREC run and the traces JSONL as they complete (an interrupted run is a
valid partial run, ``resume`` continues it), and the run statistics go to ``<output>.stats.json``.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from rearank.errors import RearankError
from rearank.io.files import check_id
from rearank.io.outputs import check_outputs, exclusive
from rearank.io.trec import read_run
from rearank.measures.ir import evaluate
from rearank.run.config import resume_settings
from rearank.run.files import RunWriter, read_traces
from rearank.run.stats import RunStats
from rearank.types import Request, Result

#: Load every candidate of a run (the reranker's ``top_k`` decides how many it reorders).
ALL_CANDIDATES = sys.maxsize


class Ranker(Protocol):
    """What a run needs from a reranker (the listwise and the groupwise ones both are)."""

    def rerank(self, requests: Sequence[Request], on_result: Callable[[Result], None] | None = None,
               progress: bool = True) -> list[Result]: ...

    def close(self) -> None: ...


def check_unique_qids(requests: Sequence[Request]) -> None:
    """Raise :class:`RearankError` naming the first qid that appears twice."""
    seen: set[str] = set()
    for request in requests:
        if request.query.qid in seen:
            raise RearankError(f"query {request.query.qid!r} appears twice in the input; qids must be unique")
        seen.add(request.query.qid)


def output_paths(output: Path, traces: Path | None = None, stats: Path | None = None) -> tuple[Path, Path]:
    """The traces file (default ``<output>.traces.jsonl``) and the stats file (default ``<output>.stats.json``)."""
    return (traces or output.with_name(output.name + ".traces.jsonl"),
            stats or output.with_name(output.name + ".stats.json"))


def rerank_to_files(
    requests: Sequence[Request],
    make_ranker: Callable[[], Ranker],
    *,
    own_ranker: bool = True,
    output: Path,
    traces: Path | None = None,
    stats: Path | None = None,
    resume: bool = False,
    overwrite: bool = True,
    tag: str = "rearank",
    progress: bool = True,
    extra: dict[str, Any] | None = None,
    config: Mapping[str, Any] | None = None,
    windows: Mapping[str, int] | None = None,
    inputs: Mapping[str, Path | None] | None = None,
) -> tuple[RunStats, dict[str, Any]]:
    """Rerank ``requests`` into ``output`` (+ traces and stats); return the stats and the extra stats entries.

    ``make_ranker`` is called only when some query is left to do, so a finished run loads no model; the ranker is
    closed afterwards unless ``own_ranker`` is False (the caller keeps using it). The outputs
    must not be one of ``inputs`` (name -> path) or each other, and one process writes them at a time. ``config``
    (the run's settings) is recorded in the stats before any work; a ``resume`` with other settings is refused.
    ``windows`` (qid -> traces a finished query has) lets a resume rerun queries whose traces were cut. Without
    ``resume``, a run already in ``output`` (or its traces) is replaced only if ``overwrite``. After a
    resume the stats count the earlier queries and their wall time too, as an uninterrupted run's would.
    """
    output = Path(output)
    if output.is_dir():
        raise RearankError(f"output {output} is a folder; give a file name")
    check_id(tag, "run tag", output)  # before any file is written
    traces, stats_path = output_paths(output, traces, stats)
    check_outputs(inputs or {}, {"--output": output, "--traces": traces, "the stats file": stats_path})
    if not (resume or overwrite):
        earlier = [path for path in (output, traces) if path.is_file() and path.stat().st_size]
        if earlier:
            raise RearankError(f"{earlier[0]} already holds a run; pass --resume to continue it, --overwrite to "
                               "replace it, or choose another --output")
    with exclusive(output):
        if resume and config is not None:
            check_resume_settings(output, stats_path, config)
        expected = {r.query.qid: len(r.candidates) for r in requests}
        writer = RunWriter(output, traces, resume=resume, expected=expected, expected_traces=windows, tag=tag)
        todo = [r for r in requests if r.query.qid not in writer.done]
        run_stats = RunStats(earlier_s=earlier_wall(stats_path) if resume and writer.done else 0.0)
        if resume:
            print(f"resume: {len(requests) - len(todo)} of {len(requests)} queries already in {output}",
                  file=sys.stderr)
            earlier = read_traces(traces) if writer.done else {}
            for qid in sorted(writer.done):
                run_stats.add_traces(earlier.get(qid, ()))
        extra = {**(extra or {}), "resumed_queries": len(requests) - len(todo)}
        if config is not None:
            extra["config"] = dict(config)
        run_stats.write(stats_path, extra=extra)  # records the settings before any work, for a later resume

        def save(result: Result) -> None:
            writer.write(result)
            run_stats.add(result)

        try:
            if todo:
                ranker = make_ranker()
                run_stats.restart()
                try:
                    ranker.rerank(todo, on_result=save, progress=progress)
                finally:
                    if own_ranker:
                        ranker.close()
        except KeyboardInterrupt:
            print(f"interrupted: {run_stats.queries} queries finished in this session are saved in {output}; "
                  "rerun with --resume to continue", file=sys.stderr)
            raise
        finally:
            writer.close()
            pending = sys.exc_info()[1]  # the error that ended the run (a full disk) is the one to report
            try:
                run_stats.write(stats_path, extra=extra)
            except RearankError:
                if pending is None:
                    raise
    return run_stats, extra


def earlier_wall(stats_path: Path) -> float:
    """The wall time recorded by the sessions a resumed run continues (0 when the stats file is unreadable)."""
    try:
        wall = json.loads(stats_path.read_text(encoding="utf-8"))["wall_time_s"]
        return float(wall) if isinstance(wall, (int, float)) and 0 <= wall < math.inf else 0.0
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return 0.0


def check_resume_settings(output: Path, stats_path: Path, config: Mapping[str, Any]) -> None:
    """Refuse to resume a run made with other settings (:func:`resume_settings`), or whose settings were not
    recorded."""
    if not output.is_file() or output.stat().st_size == 0:
        return
    try:
        recorded = json.loads(stats_path.read_text(encoding="utf-8"))["config"]
        if not isinstance(recorded, dict):
            raise TypeError
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        raise RearankError(f"--resume: {stats_path} (the settings of the run in {output}) is missing or unreadable, "
                           "so the run cannot be continued safely; rerun without --resume") from None
    source = f"--resume: {stats_path} (the settings of the run in {output})"
    ours, theirs = resume_settings(config), resume_settings(recorded, source=source)
    changed = sorted(k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k))
    if changed:
        diff = ", ".join(f"{k}: {recorded.get(k)!r} -> {config.get(k)!r}" for k in changed)
        raise RearankError(f"--resume: {output} was made with other settings ({diff}); resume with the same "
                           "settings, or write to another --output")


def ndcg_before_after(
    requests: Sequence[Request], qrels: Mapping[str, Mapping[str, int]], output: Path
) -> dict[str, float]:
    """nDCG@10 of the first-stage order and of the run in ``output``, on the judged input queries ({} if none)."""
    judged = {r.query.qid: dict(qrels[r.query.qid]) for r in requests if r.query.qid in qrels}
    if not judged:
        return {}
    before = {r.query.qid: [(c.docid, float(len(r.candidates) - i)) for i, c in enumerate(r.candidates)]
              for r in requests}
    after = read_run(output)
    b = evaluate(judged, before, ["nDCG@10"]).aggregate["ndcg_cut_10"]
    a = evaluate(judged, after, ["nDCG@10"]).aggregate["ndcg_cut_10"]
    return {"before": b, "after": a, "queries": len(judged)}
