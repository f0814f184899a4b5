"""BAR-RAG's training filter as its own resumable step over a ``barrag-selector`` parquet folder.

For every training question: 8 selector samples (one request, ``n=8``) from the selector being trained (its
starting checkpoint, served OpenAI-style), each selection read 10 times by the reader at temperature 0.7 (one
request, ``n=10``); the per-selection accuracies are judged by :func:`rearank.rag.barrag.filtering.judge`.
An unparseable selection has accuracy 0 and costs no reader call.

Each finished question is appended to ``filter_log.jsonl`` in the output folder at once (flushed), so an
interrupted run resumes where it stopped; a question whose selector or reader call fails is not logged (counted,
retried on the next run). When every question is judged, the kept rows of ``train.parquet`` and an unchanged copy
of ``val.parquet`` are written beside the log (renamed into place), with ``filter_stats.json``.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rearank.errors import RearankError
from rearank.io.files import atomic_path, atomic_write
from rearank.io.jsonl_log import JsonlAppender, read_jsonl_log
from rearank.methods.barrag.parser import parse_selection
from rearank.methods.barrag.prompt import generator_messages
from rearank.methods.barrag.reader import ReaderError, reader_endpoint, sample_reader
from rearank.methods.barrag.reward import parse_selector_truth, success_rate
from rearank.rag.barrag.filtering import (
    MEAN_RANGE,
    MIN_VARIANCE,
    READER_SAMPLES,
    READER_TEMPERATURE,
    SELECTOR_SAMPLES,
    judge,
)

LOG = "filter_log.jsonl"


@dataclass(frozen=True)
class FilterSettings:
    selector_url: str
    selector_model: str
    reader_url: str
    reader_model: str
    selector_samples: int = SELECTOR_SAMPLES
    reader_samples: int = READER_SAMPLES
    selector_temperature: float = 1.0
    reader_temperature: float = READER_TEMPERATURE
    tau: float = 0.8
    selector_max_tokens: int = 1024
    reader_max_tokens: int = 1024
    questions_in_flight: int = 8
    timeout_s: float = 300.0
    retries: int = 3


async def question_accuracies(row: dict, settings: FilterSettings) -> list[float]:
    """Per-selection reader accuracies of one selector row; raises ReaderError when a call fails."""
    truth = parse_selector_truth(row["reward_model"]["ground_truth"])
    if truth is None:
        raise RearankError(f"question {row['extra_info']['qid']}: malformed ground truth (not a barrag-selector row)")
    selections = await sample_reader(
        reader_endpoint(settings.selector_url, None), settings.selector_model, list(row["prompt"]),
        settings.selector_samples, temperature=settings.selector_temperature,
        max_tokens=settings.selector_max_tokens, timeout_s=settings.timeout_s, max_retries=settings.retries)

    async def accuracy(text: str) -> float:
        parsed = parse_selection(text, len(truth.docs))
        if not parsed.valid:
            return 0.0
        answers = await sample_reader(
            reader_endpoint(settings.reader_url, None), settings.reader_model,
            generator_messages(truth.question, [truth.docs[i - 1] for i in parsed.ids]), settings.reader_samples,
            temperature=settings.reader_temperature, max_tokens=settings.reader_max_tokens,
            timeout_s=settings.timeout_s, max_retries=settings.retries)
        return success_rate(answers, truth.gold, settings.tau, n_docs=len(parsed.ids))

    return list(await asyncio.gather(*(accuracy(t) for t in selections)))


def _done(log_path: Path) -> dict[str, dict]:
    records = read_jsonl_log(log_path, lambda r: (str(r["qid"]), bool(r["keep"]), str(r["reason"])), "filter log",
                             "remove the file to start over")
    return {str(r["qid"]): r for r in records}


async def _judge_all(rows: list[dict], settings: FilterSettings, log: JsonlAppender,
                     progress: Callable[[], None]) -> int:
    """Judge ``rows`` (``settings.questions_in_flight`` at once), log each verdict; return the reads that failed."""
    failed = 0
    semaphore = asyncio.Semaphore(settings.questions_in_flight)

    async def one(row: dict) -> None:
        nonlocal failed
        async with semaphore:
            try:
                accuracies = await question_accuracies(row, settings)
            except ReaderError:
                failed += 1
                progress()
                return
        verdict = judge(accuracies)
        log.write({"qid": row["extra_info"]["qid"], "accuracies": accuracies, "mean": round(verdict.mean, 6),
                   "variance": round(verdict.variance, 6), "keep": verdict.keep, "reason": verdict.reason})
        progress()

    await asyncio.gather(*(one(r) for r in rows))
    return failed


def run_filter(data_dir: Path, output_dir: Path, settings: FilterSettings, progress: bool = True) -> dict[str, Any]:
    """Judge every training question not yet in the log; write the kept rows when all are judged."""
    import pyarrow.parquet as pq
    from tqdm import tqdm

    train = data_dir / "train.parquet"
    if not train.is_file():
        raise RearankError(f"{train} not found; make it with `rearank synth --method barrag-selector --qa FILE "
                           f"--output-dir {data_dir}`")
    if output_dir.resolve() == data_dir.resolve():
        raise RearankError("--output-dir must differ from the input folder (the input parquet is never overwritten)")
    output_dir.mkdir(parents=True, exist_ok=True)
    table = pq.read_table(train)
    rows = table.to_pylist()
    log_path = output_dir / LOG
    done = _done(log_path)
    todo = [r for r in rows if r["extra_info"]["qid"] not in done]
    bar = tqdm(total=len(todo), desc="barrag filter", unit="question", disable=not progress)
    with JsonlAppender(log_path) as log:
        failed = asyncio.run(_judge_all(todo, settings, log, bar.update))
    bar.close()
    done = _done(log_path)
    stats: dict[str, Any] = {
        "questions": len(rows), "judged": sum(r["extra_info"]["qid"] in done for r in rows),
        "failed_this_run": failed, "reasons": dict(Counter(d["reason"] for d in done.values())),
        "rules": {"selector_samples": settings.selector_samples, "reader_samples": settings.reader_samples,
                  "reader_temperature": settings.reader_temperature, "tau": settings.tau,
                  "mean_range": list(MEAN_RANGE), "min_variance": MIN_VARIANCE},
    }
    if stats["judged"] < len(rows):
        stats["complete"] = False
        return stats
    keep = [bool(done[r["extra_info"]["qid"]]["keep"]) for r in rows]
    stats.update(complete=True, kept=sum(keep))
    with atomic_path(output_dir / "train.parquet") as tmp:
        pq.write_table(table.filter(keep) if rows else table, tmp)
    if (data_dir / "val.parquet").is_file():
        with atomic_path(output_dir / "val.parquet") as tmp:
            shutil.copyfile(data_dir / "val.parquet", tmp)
    with atomic_write(output_dir / "filter_stats.json") as handle:
        handle.write(json.dumps(stats, indent=1) + "\n")
    return stats
