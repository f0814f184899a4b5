"""RAG evaluation: select passages, read the top-k, score the answers; per-item JSONL, metrics.json, a table.

An output folder holds ``config.json`` (what was run), ``items.jsonl`` (one record per question, appended and
flushed as each chunk of questions finishes), ``metrics.json`` and ``table.md``. ``resume=True`` keeps the
finished records (a torn last line is dropped) and runs the rest; it refuses a folder made with another
configuration. Questions go through the selector and the reader ``chunk`` at a time, so the reader sees the
prompts of many questions (and every k) in one batch.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np
from tqdm import tqdm

from rearank.errors import FormatError, RearankError
from rearank.io._files import atomic_write
from rearank.rag.metrics import answer_recall, exact_match, hit, support_recall, token_f1
from rearank.rag.readers import Reader, ReaderOutput
from rearank.rag.selectors import Selector
from rearank.rag.types import Passage, QAItem
from rearank.significance import paired_t_p, randomization_p

log = logging.getLogger("rearank.rag.evaluate")

MEASURES = ("em", "f1", "hit", "answer_recall", "support_recall", "support_all")
#: RRPO paper, Table 1 (EM / F1, x100): Qwen reader over BM25 top-k, + gte reranker, + gte trained with RRPO.
PAPER_RRPO: dict[str, tuple[tuple[str, float, float], ...]] = {
    "hotpotqa": (("BM25", 24.23, 35.42), ("BM25 + gte reranker", 28.24, 41.23),
                 ("BM25 + gte reranker + RRPO", 30.03, 43.22)),
    "ambignq": (("BM25", 20.33, 32.18), ("BM25 + gte reranker", 35.51, 48.55),
                ("BM25 + gte reranker + RRPO", 36.56, 49.67)),
}


def score_answer(output: ReaderOutput, answers: Sequence[str], style: str = "squad") -> dict[str, float]:
    """EM and F1 of the extracted answer, Hit of the whole response."""
    return {"em": exact_match(output.answer, answers, style), "f1": token_f1(output.answer, answers, style),
            "hit": hit(output.response, answers, style)}


def item_record(item: QAItem, ranking: Sequence[Passage], ks: Sequence[int],
                outputs: dict[int, ReaderOutput], style: str = "squad") -> dict[str, Any]:
    """The JSON record of one evaluated question."""
    per_k = {}
    for k in ks:
        top = ranking[:k]
        pids = [p.pid for p in top]
        per_k[str(k)] = {
            "passages": pids,
            "response": outputs[k].response,
            "answer": outputs[k].answer,
            **score_answer(outputs[k], item.answers, style),
            "answer_recall": answer_recall([f"{p.title} {p.text}" for p in top], item.answers, k, style),
            "support_recall": support_recall(pids, item.supporting),
            "support_all": float(bool(item.supporting) and item.supporting <= set(pids)),
        }
    return {"qid": item.qid, "source": item.source, "question": item.question, "answers": list(item.answers),
            "supporting": sorted(item.supporting), "ranking": [p.pid for p in ranking], "k": per_k}


def read_records(path: Path, repair: bool = False) -> dict[str, dict]:
    """Records of an ``items.jsonl`` by qid; a torn last line is dropped (and cut from the file if ``repair``)."""
    records: dict[str, dict] = {}
    if not path.is_file():
        return records
    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    complete = lines[:-1]  # the part after the last newline is empty, or torn
    torn = lines[-1].strip() != ""
    for number, line in enumerate(complete, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            records[str(record["qid"])] = record
            _ = record["k"]
        except (ValueError, KeyError, TypeError) as err:
            if number == len(complete) and not torn:
                torn = True  # a last line that did not parse: treat as interrupted
                continue
            raise FormatError(path, number, f"not a rag eval record ({err}); start a new --output") from None
    if torn:
        log.warning("%s: dropping an unfinished last record", path)
        if repair:
            with atomic_write(path) as handle:
                for record in records.values():
                    handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return records


def aggregate(records: Iterable[dict], ks: Sequence[int]) -> dict[str, Any]:
    """Mean of every measure per k (``{"3": {"em": ..., ...}}``) over the records, and their count."""
    records = list(records)
    out: dict[str, Any] = {"questions": len(records), "k": {}}
    for k in ks:
        rows = [r["k"][str(k)] for r in records if str(k) in r["k"]]
        out["k"][str(k)] = {m: float(np.mean([row[m] for row in rows])) if rows else 0.0 for m in MEASURES}
    return out


class RagEvaluation:
    """One ``rag eval`` run into ``output`` (a folder)."""

    def __init__(self, output: Path, config: dict[str, Any], resume: bool = False) -> None:
        self.output = Path(output)
        if self.output.exists() and not self.output.is_dir():
            raise RearankError(f"--output {self.output} is a file; give a folder")
        self.items_path = self.output / "items.jsonl"
        self.config = config
        config_path = self.output / "config.json"
        if resume and config_path.is_file():
            before = json.loads(config_path.read_text(encoding="utf-8"))
            changed = sorted(k for k in set(before) | set(config) if before.get(k) != config.get(k))
            if changed:
                raise RearankError(f"{self.output} was made with other settings ({', '.join(changed)}); "
                                   "use a new --output or the same settings")
        elif self.items_path.is_file() and self.items_path.stat().st_size and not resume:
            raise RearankError(f"{self.items_path} exists; pass --resume to continue it or choose another --output")
        self.records = read_records(self.items_path, repair=True) if resume else {}
        if not resume and self.items_path.is_file():
            self.items_path.unlink()
        with atomic_write(config_path) as handle:
            json.dump(config, handle, indent=2)
            handle.write("\n")

    def run(self, items: Sequence[QAItem], selector: Selector, reader: Reader, ks: Sequence[int],
            style: str = "squad", chunk: int = 32, progress: bool = True) -> dict[str, Any]:
        """Evaluate the items not yet in ``items.jsonl``; write metrics.json and table.md over all of them."""
        ks = sorted(set(ks))
        todo = [item for item in items if item.qid not in self.records]
        handle: IO[str] | None = None
        bar = tqdm(total=len(items), initial=len(items) - len(todo), unit="question", desc="rag eval",
                   disable=not progress, dynamic_ncols=True)
        try:
            for start in range(0, len(todo), chunk):
                batch = todo[start:start + chunk]
                rankings = selector.rank(batch)
                pairs = [(item, ranking[:k]) for item, ranking in zip(batch, rankings) for k in ks]
                answers = reader.read(pairs)
                if len(answers) != len(pairs):
                    raise RearankError(f"reader {reader.name!r} gave {len(answers)} answers for {len(pairs)} contexts")
                for i, (item, ranking) in enumerate(zip(batch, rankings)):
                    outputs = dict(zip(ks, answers[i * len(ks):(i + 1) * len(ks)]))
                    record = item_record(item, ranking, ks, outputs, style)
                    if handle is None:
                        self.output.mkdir(parents=True, exist_ok=True)
                        handle = open(self.items_path, "a", encoding="utf-8")  # noqa: SIM115 - closed below
                    handle.write(json.dumps(record, ensure_ascii=False) + "\n")
                    self.records[item.qid] = record
                if handle is not None:
                    handle.flush()
                bar.update(len(batch))
        finally:
            bar.close()
            if handle is not None:
                handle.close()
        wanted = {item.qid for item in items}
        metrics = aggregate((r for q, r in self.records.items() if q in wanted), ks)
        metrics["config"] = self.config
        with atomic_write(self.output / "metrics.json") as out:
            json.dump(metrics, out, indent=2)
            out.write("\n")
        sources = sorted({item.source for item in items})
        table = markdown_table(metrics, self.config.get("label", "ours"), sources)
        with atomic_write(self.output / "table.md") as out:
            out.write(table + "\n")
        return metrics


def markdown_table(metrics: dict[str, Any], label: str, sources: Sequence[str] = ()) -> str:
    """Our figures per k (x100), then the RRPO paper's for the same dataset (a different setting: see docs)."""
    rows = ["| run | k | EM | F1 | Hit | answer recall | support recall | all support in top-k |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for k, m in metrics["k"].items():
        rows.append(f"| {label} (n={metrics['questions']}) | {k} | " +
                    " | ".join(f"{100 * m[name]:.2f}" for name in MEASURES) + " |")
    for source in sources:
        for name, em, f1 in PAPER_RRPO.get(source, ()):
            rows.append(f"| RRPO paper, {source}: {name} | 3 | {em:.2f} | {f1:.2f} | | | | |")
    return "\n".join(rows)


def compare_runs(a: Path, b: Path, k: int, measures: Sequence[str] = ("em", "f1", "hit"),
                 permutations: int = 10000, seed: int = 0) -> str:
    """Paired comparison of two ``rag eval`` folders at top-``k`` on the questions both finished (markdown)."""
    ra, rb = read_records(Path(a) / "items.jsonl"), read_records(Path(b) / "items.jsonl")
    qids = sorted(q for q in set(ra) & set(rb) if str(k) in ra[q]["k"] and str(k) in rb[q]["k"])
    if not qids:
        raise RearankError(f"{a} and {b} have no question evaluated at k={k} in common")
    rows = [f"A = {a}", f"B = {b}", f"k = {k}, {len(qids)} paired questions", "",
            "| measure | A | B | delta (B-A) | t-test p | randomization p | B wins/ties/losses |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for m in measures:
        va = np.array([ra[q]["k"][str(k)][m] for q in qids], dtype=float)
        vb = np.array([rb[q]["k"][str(k)][m] for q in qids], dtype=float)
        rows.append(f"| {m} | {100 * va.mean():.2f} | {100 * vb.mean():.2f} | {100 * (vb.mean() - va.mean()):+.2f} | "
                    f"{paired_t_p(va, vb):.4f} | {randomization_p(va, vb, permutations, seed):.4f} | "
                    f"{int(np.sum(vb > va))}/{int(np.sum(vb == va))}/{int(np.sum(vb < va))} |")
    return "\n".join(rows)
