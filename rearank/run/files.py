"""Incremental output of a reranking run: TREC run lines and window traces, one whole query at a time.

Each finished query is appended and flushed (its traces first, then its run lines), so an interrupted
run leaves every finished query on disk. On resume, :func:`check_resumable` first refuses files it cannot trust
(traces gone or another run's, a run holding queries the input no longer has); :func:`recover` then keeps only
the queries whose run lines are complete and well formed and whose traces are all there and answered (a window
whose model call failed makes its query unfinished), rewrites both files with them, and reports their qids so the
caller skips them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import IO

from rearank.backends.base import ERROR
from rearank.errors import FormatError, RearankError
from rearank.io.files import PathLike, atomic_write, is_gzip, open_input
from rearank.io.trec import append_run
from rearank.run.stats import plural
from rearank.types import Result, WindowTrace

log = logging.getLogger("rearank.run.files")


def ranked_pairs(result: Result) -> list[tuple[str, float]]:
    """``(docid, score)`` in the result's order with strictly decreasing scores ``n, n-1, …, 1``.

    trec_eval sorts by score, so these scores keep the reranked order exactly.
    """
    n = len(result.candidates)
    return [(c.docid, float(n - rank)) for rank, c in enumerate(result.candidates)]


def trace_record(trace: WindowTrace) -> dict:
    """A window trace as a JSON object (one line of the traces file; ``error`` only on a failed window)."""
    record = asdict(trace)
    record["permutation"] = list(trace.permutation)
    if not trace.error:
        del record["error"]  # only a failed window says why
    return record


def read_traces(path: PathLike) -> dict[str, list[WindowTrace]]:
    """Window traces of a traces JSONL (as :class:`RunWriter` writes them), by qid, in file order."""
    traces: dict[str, list[WindowTrace]] = {}
    with open_input(path) as handle:
        for number, raw in enumerate(handle, start=1):
            line = raw.decode("utf-8", errors="replace")
            if not line.strip():
                continue
            trace = _trace(line)
            if trace is None:
                raise FormatError(path, number, "not a window trace")
            traces.setdefault(trace.qid, []).append(trace)
    return traces


def _trace(line: str) -> WindowTrace | None:
    """One traces line as a window trace; None when it is not one (cut, edited, another format)."""
    try:
        record = json.loads(line)
        return WindowTrace(**{**record, "permutation": tuple(record["permutation"])})
    except (ValueError, TypeError, KeyError, RecursionError):
        return None


def _run_blocks(path: Path) -> tuple[dict[str, list[str]], set[str], str | None]:
    """Group the lines of a run file by qid; return the groups, the qids with a malformed line and the qid of a
    torn last line (no newline: a write cut short, its qid maybe cut too) when no other line has it."""
    blocks: dict[str, list[str]] = {}
    bad: set[str] = set()
    torn = None
    text = path.read_text(encoding="utf-8", errors="replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for number, line in enumerate(lines, start=1):
        fields = line.split()
        if not fields:
            continue
        blocks.setdefault(fields[0], []).append(line)
        partial = number == len(lines) and not text.endswith("\n")
        if partial or len(fields) != 6 or not _is_number(fields[3]) or not _is_number(fields[4]):
            bad.add(fields[0])
        if partial and len(blocks[fields[0]]) == 1:
            torn = fields[0]
    return blocks, bad, torn


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def recover(run_path: PathLike, traces_path: PathLike | None, expected: Mapping[str, int],
            expected_traces: Mapping[str, int] | None = None) -> set[str]:
    """Keep only the complete queries of an interrupted run and return their qids.

    A query is complete when all its run lines are well formed (the last one ends with a newline), it has
    exactly ``expected[qid]`` lines if ``expected`` knows its qid, -- when ``expected_traces`` knows it --
    the traces file holds exactly ``expected_traces[qid]`` well-formed traces for it, and none of its traces is a
    failed model call (status ``error``). Incomplete queries are
    removed from the run and their traces from the traces file (both rewritten atomically), so they are
    reranked again.
    """
    run_file = Path(run_path)
    if not run_file.is_file():
        return set()
    blocks, bad, _ = _run_blocks(run_file)
    done = {qid for qid, lines in blocks.items() if qid not in bad and len(lines) == expected.get(qid, len(lines))}
    traces = _trace_lines(Path(traces_path)) if traces_path is not None and Path(traces_path).is_file() else {}
    if expected_traces is not None and traces_path is not None:
        done = {qid for qid in done if len(traces.get(qid, ())) == expected_traces.get(qid, len(traces.get(qid, ())))}
    failed = {qid for qid, lines in traces.items() if qid is not None
              and any(getattr(_trace(line), "status", None) == ERROR for line in lines)}
    if failed & done:
        log.warning("%s: %d queries have windows whose model call failed, they will be reranked: %s",
                    run_file, len(failed & done), ", ".join(sorted(failed & done)[:10]))
        done -= failed
    dropped = set(blocks) - done
    if dropped:
        log.warning("%s: %d incomplete queries dropped, they will be reranked: %s",
                    run_file, len(dropped), ", ".join(sorted(dropped)[:10]))
        with atomic_write(run_file) as handle:
            for qid in blocks:
                if qid in done:
                    handle.write("".join(line + "\n" for line in blocks[qid]))
    if traces_path is not None and Path(traces_path).is_file():
        kept = [line for qid in traces if qid in done for line in traces[qid]]
        if len(kept) != sum(map(len, traces.values())) or traces.get(None):
            with atomic_write(traces_path) as handle:
                handle.write("".join(line + "\n" for line in kept))
    return done


def _trace_lines(path: Path) -> dict[str | None, list[str]]:
    """The lines of a traces file by qid, in file order; lines that are not a trace fall under ``None``."""
    by_qid: dict[str | None, list[str]] = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        trace = _trace(line) if line.strip() else None
        by_qid.setdefault(trace.qid if trace is not None else None, []).append(line)
    return by_qid


def check_resumable(run_path: PathLike, traces_path: PathLike | None, expected: Mapping[str, int] | None) -> None:
    """Refuse to resume a run whose files cannot be trusted: queries in ``run_path`` but its traces (the journal
    the resume checks each query against) gone, or holding traces of none of them (another run's file); or, when
    ``expected`` (the input's qids) is given, queries in the run that the input no longer has (another
    ``--max-queries`` or input), whose counts would not match the input's."""
    run_file = Path(run_path)
    if not run_file.is_file():
        return
    blocks, _, torn = _run_blocks(run_file)
    blocks.pop(torn, None)  # recover() drops it; its qid may be a cut-off one
    if not blocks:
        return
    queries = plural(len(blocks), "query", "queries")
    start_again = "or start the run again (rearank rerank --overwrite; resume=False in Python)"
    if traces_path is not None:
        traces = Path(traces_path)
        if not traces.is_file():
            raise RearankError(f"--resume: {run_file} holds {queries} but their traces {traces} are gone, "
                               f"so the finished queries cannot be checked: restore the traces file, {start_again}")
        held = set(_trace_lines(traces)) - {None}
        if held and not held & set(blocks):
            raise RearankError(f"--resume: the traces {traces} hold none of the {queries} of {run_file} "
                               f"(another run's file?): restore this run's traces, {start_again}")
    if expected is not None:
        extra = [qid for qid in blocks if qid not in expected]
        if extra:
            held_only = plural(len(extra), "query", "queries")
            raise RearankError(f"--resume: {run_file} holds {held_only} the input does not have (first: {extra[0]!r}; "
                               "another --max-queries or input?): resume with the input and --max-queries of the run "
                               "(or more queries), or write to another --output")


class RunWriter:
    """Append finished queries to a TREC run (and a traces JSONL), flushing after each query.

    ``resume=True`` keeps the complete queries already in the files (see :func:`check_resumable` and
    :func:`recover`) and lists them in :attr:`done`; otherwise both files are started afresh.
    """

    def __init__(
        self,
        run_path: PathLike,
        traces_path: PathLike | None = None,
        *,
        resume: bool = False,
        expected: Mapping[str, int] | None = None,
        expected_traces: Mapping[str, int] | None = None,
        tag: str = "rearank",
    ) -> None:
        for path in (run_path, traces_path):
            if path is not None and is_gzip(path):
                raise RearankError(f"{path}: incremental output cannot be gzip; write plain text and compress it after")
        self.tag = tag
        self._handles: list[IO[str]] = []
        if resume:
            check_resumable(run_path, traces_path, expected)
        paths = [Path(p) for p in (run_path, traces_path) if p is not None]
        for path in paths:  # fail on an unwritable place before anything is truncated or rewritten
            self._open(path, "a").close()
        self._handles.clear()
        self.done: set[str] = recover(run_path, traces_path, expected or {}, expected_traces) if resume else set()
        mode = "a" if resume else "w"  # "w" empties a file and also opens a device (/dev/null), which truncate can't
        self._run = self._open(Path(run_path), mode)
        self._traces = self._open(Path(traces_path), mode) if traces_path is not None else None

    def _open(self, target: Path, mode: str) -> IO[str]:
        """Open ``target`` (creating it), or raise a one-line error naming it."""
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            handle = open(target, mode, encoding="utf-8", newline="\n")  # noqa: SIM115 (kept open)
        except OSError as err:
            self.close()
            raise RearankError(f"{target}: cannot write output ({err.strerror or err})") from None
        self._handles.append(handle)
        return handle

    def write(self, result: Result) -> None:
        """Append one finished query: its traces, then its run lines; flush both."""
        handle = self._traces
        try:
            if self._traces is not None:
                self._traces.write("".join(json.dumps(trace_record(t), ensure_ascii=False) + "\n"
                                           for t in result.traces))
                self._traces.flush()
            handle = self._run
            append_run(self._run, result.query.qid, ranked_pairs(result), self.tag)
        except OSError as err:  # a full disk: the queries written before are kept; --resume continues
            raise RearankError(f"{handle.name}: cannot write output ({err.strerror or err}); the finished queries "
                               "are kept, free space and rerun with --resume") from None
        self.done.add(result.query.qid)

    def close(self) -> None:
        """Close the files (idempotent; a failed final flush is not raised again)."""
        for handle in self._handles:
            try:
                handle.close()
            except OSError:
                pass
        self._handles.clear()
