"""RAG evaluation: select passages, read the top-k, score the answers; per-item JSONL, metrics.json, a table.

An output folder holds ``config.json`` (what was run), ``items.jsonl`` (one record per question, appended and
flushed as each chunk of questions finishes), ``metrics.json`` and ``table.md``. ``resume=True`` keeps the
finished records (a torn last line is dropped) and runs the rest; it refuses a folder made with another
configuration. Questions go through the selector and the reader ``chunk`` at a time, so the reader sees the
prompts of many questions (and every k) in one batch.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from rearank.errors import RearankError
from rearank.io.files import atomic_write
from rearank.io.jsonl_log import JsonlAppender, read_jsonl_log
from rearank.measures.answers import answer_recall, exact_match, hit, support_recall, token_f1
from rearank.measures.significance import paired_t_p, randomization_p
from rearank.rag.arena.evaluate import arena_passages, score_arena
from rearank.rag.arena.figures import TABLE3 as ARENA_TABLE3
from rearank.rag.barrag.figures import TABLE1_AVG_EM_QWEN25_7B as BARRAG_TABLE1
from rearank.rag.readers import Reader, ReaderOutput, answer_format
from rearank.rag.selectors import Selector
from rearank.types import Passage, QAItem

MEASURES = ("em", "f1", "hit", "answer_recall", "support_recall", "support_all")
#: The record key and measures of an ARENA generator run (``--template arena``: one reading of its references).
ARENA_KEY = "arena"
ARENA_MEASURES = ("em", "f1", "hit", "format_ok", "relevance_exact", "relevance_overlap", "relevance_precision",
                  "relevance_recall")
#: RRPO paper, Table 1 (EM / F1, x100): Qwen reader over BM25 top-k, + gte reranker, + gte trained with RRPO.
PAPER_RRPO: dict[str, tuple[tuple[str, float, float], ...]] = {
    "hotpotqa": (("BM25", 24.23, 35.42), ("BM25 + gte reranker", 28.24, 41.23),
                 ("BM25 + gte reranker + RRPO", 30.03, 43.22)),
    "ambignq": (("BM25", 20.33, 32.18), ("BM25 + gte reranker", 35.51, 48.55),
                ("BM25 + gte reranker + RRPO", 36.56, 49.67)),
}


_TAG = re.compile(r"</?[A-Za-z_]+>")


def score_answer(output: ReaderOutput, answers: Sequence[str], style: str = "squad") -> dict[str, float]:
    """EM and F1 of the extracted answer, Hit of the whole response (its tags, e.g. ``<answer>``, as spaces)."""
    return {"em": exact_match(output.answer, answers, style), "f1": token_f1(output.answer, answers, style),
            "hit": hit(_TAG.sub(" ", output.response), answers, style)}


def _base_record(item: QAItem, ranking: Sequence[Passage]) -> dict[str, Any]:
    return {"qid": item.qid, "source": item.source, "question": item.question, "answers": list(item.answers),
            "supporting": sorted(item.supporting), "ranking": [p.pid for p in ranking]}


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
            "answer_recall": answer_recall([p.text for p in top], item.answers, k),
            "support_recall": support_recall(pids, item.supporting),
            "support_all": float(bool(item.supporting) and item.supporting <= set(pids)),
            **({"reader_failed": True} if outputs[k].failed else {}),
        }
    return {**_base_record(item, ranking), "k": per_k}


def arena_view(item: QAItem, ranking: Sequence[Passage]) -> QAItem:
    """The item with its passages in the selector's order: what the ARENA generator is shown (its first 10/20)."""
    return replace(item, passages=tuple(ranking))


def arena_record(item: QAItem, ranking: Sequence[Passage], output: ReaderOutput) -> dict[str, Any]:
    """The JSON record of one question read by an ARENA generator (:func:`rearank.rag.arena.evaluate.score_arena`)."""
    view = arena_view(item, ranking)
    scores = score_arena(view, output.response)
    return {**_base_record(item, ranking),
            "k": {ARENA_KEY: {"shown": [p.pid for p in arena_passages(view)], "response": output.response,
                              **scores, **({"reader_failed": True} if output.failed else {})}}}


def read_records(path: Path, repair: bool = False) -> dict[str, dict]:
    """Records of an ``items.jsonl`` by qid; a torn last line is dropped (and cut from the file if ``repair``)."""
    records = read_jsonl_log(path, lambda r: (str(r["qid"]), r["k"].items()), "rag eval", "start a new --output-dir",
                             repair)
    return {str(r["qid"]): r for r in records}


def aggregate(records: Iterable[dict], keys: Sequence[int | str]) -> dict[str, Any]:
    """Mean of every measure per k (``{"3": {"em": ..., ...}}``, or ``{"arena": ...}``) over the records, their
    count, the reads the reader failed (per k; scored as wrong answers) and the count of each selector parse status
    (BAR-RAG selectors)."""
    records = list(records)
    out: dict[str, Any] = {"questions": len(records), "k": {}}
    for key in map(str, keys):
        rows = [r["k"][key] for r in records if key in r["k"]]
        measures = ARENA_MEASURES if key == ARENA_KEY else MEASURES
        if rows and all("judge" in row for row in rows):
            measures = (*measures, "judge")
        out["k"][key] = {m: float(np.mean([row[m] for row in rows])) if rows else 0.0 for m in measures}
        out["k"][key]["reader_failed"] = sum(bool(row.get("reader_failed")) for row in rows)
    statuses = Counter(r["selector"]["status"] for r in records if "selector" in r)
    if statuses:
        out["selector_statuses"] = dict(sorted(statuses.items()))
    return out


class RagEvaluation:
    """One ``rag eval`` run into ``output`` (a folder)."""

    def __init__(self, output: Path, config: dict[str, Any], resume: bool = False) -> None:
        self.output = Path(output)
        if self.output.exists() and not self.output.is_dir():
            raise RearankError(f"--output-dir {self.output} is a file; give a folder")
        self.items_path = self.output / "items.jsonl"
        self.config = config
        config_path = self.output / "config.json"
        if resume and config_path.is_file():
            before = json.loads(config_path.read_text(encoding="utf-8"))
            changed = sorted(k for k in set(before) | set(config) if before.get(k) != config.get(k))
            if changed:
                raise RearankError(f"{self.output} was made with other settings ({', '.join(changed)}); "
                                   "use a new --output-dir or the same settings")
        elif self.items_path.is_file() and self.items_path.stat().st_size and not resume:
            raise RearankError(f"{self.items_path} exists; pass --resume to continue it or choose another --output-dir")
        self.records = read_records(self.items_path, repair=True) if resume else {}
        if not resume and self.items_path.is_file():
            self.items_path.unlink()
        with atomic_write(config_path) as handle:
            json.dump(config, handle, indent=2)
            handle.write("\n")

    def run(self, items: Sequence[QAItem], selector: Selector, reader: Reader, ks: Sequence[int],
            style: str = "squad", chunk: int = 32, progress: bool = True, arena: bool = False,
            judge: Any = None) -> dict[str, Any]:
        """Evaluate the items not yet in ``items.jsonl``; write metrics.json and table.md over all of them.

        ``arena``: the reader is an ARENA generator (``--template arena``): it reads the first 10 (MuSiQue 20) of
        the selector's order once, and its output is scored by :func:`rearank.rag.arena.evaluate.score_arena`
        (``ks`` is not used). ``judge`` (:class:`rearank.rag.judge.Judge`): each answer (the response when no
        answer was extracted) is also judged by an LLM against the gold answers (``judge`` in records and means).
        """
        keys: list[int | str] = [ARENA_KEY] if arena else sorted(set(ks))
        todo = [item for item in items if item.qid not in self.records]
        bar = tqdm(total=len(items), initial=len(items) - len(todo), unit="question", desc="rag eval",
                   disable=not progress, dynamic_ncols=True)
        details = getattr(selector, "details", None)
        with JsonlAppender(self.items_path) as log:
            try:
                for start in range(0, len(todo), chunk):
                    batch = todo[start:start + chunk]
                    records = self._evaluate(batch, selector, reader, keys, style)
                    if judge is not None:
                        self._judge(records, judge)
                    for record in records:
                        if details is not None and record["qid"] in details:
                            record["selector"] = details.pop(record["qid"])
                        log.write(record)
                        self.records[record["qid"]] = record
                    bar.update(len(batch))
            finally:
                bar.close()
        wanted = {item.qid for item in items}
        metrics = aggregate((r for q, r in self.records.items() if q in wanted), keys)
        metrics["config"] = self.config
        with atomic_write(self.output / "metrics.json") as out:
            json.dump(metrics, out, indent=2)
            out.write("\n")
        sources = sorted({item.source for item in items})
        with atomic_write(self.output / "table.md") as out:
            out.write(markdown_table(metrics, self.config, sources) + "\n")
        return metrics

    @staticmethod
    def _judge(records: list[dict[str, Any]], judge: Any) -> None:
        slots = [(r, row) for r in records for row in r["k"].values()]
        verdicts = judge.judge([(r["answers"], row.get("answer") or row["response"]) for r, row in slots])
        for (_, row), value in zip(slots, verdicts):
            row["judge"] = value

    @staticmethod
    def _evaluate(batch: Sequence[QAItem], selector: Selector, reader: Reader, keys: Sequence[int | str],
                  style: str) -> list[dict[str, Any]]:
        rankings = selector.rank(batch)
        if keys == [ARENA_KEY]:
            pairs = [(item, arena_passages(arena_view(item, ranking))) for item, ranking in zip(batch, rankings)]
        else:
            pairs = [(item, ranking[:k]) for item, ranking in zip(batch, rankings) for k in keys]
        answers = reader.read(pairs)
        if len(answers) != len(pairs):
            raise RearankError(f"reader {reader.name!r} gave {len(answers)} answers for {len(pairs)} contexts")
        if keys == [ARENA_KEY]:
            return [arena_record(item, ranking, answer) for item, ranking, answer in zip(batch, rankings, answers)]
        n = len(keys)
        return [item_record(item, ranking, keys, dict(zip(keys, answers[i * n:(i + 1) * n])), style)
                for i, (item, ranking) in enumerate(zip(batch, rankings))]


def _pct(value: float) -> str:
    return f"{100 * value:.2f}"


def _is_barrag(config: dict[str, Any]) -> bool:
    template = config.get("template")
    return template is not None and answer_format(template) == "barrag"


def markdown_table(metrics: dict[str, Any], config: dict[str, Any], sources: Sequence[str] = ()) -> str:
    """Our figures (x100, on this sample), then the published figures of the paper the run follows: BAR-RAG's Table 1
    for a ``barrag`` selector or template, ARENA's Table 3 for ``--template arena``, else RRPO's Table 1 (each a
    different setting from ours: see docs/rag.md)."""
    label = f"{config.get('label', 'ours')} (ours, on this sample, n={metrics['questions']})"
    if ARENA_KEY in metrics["k"]:
        m = metrics["k"][ARENA_KEY]
        judged = "judge" in m
        rows = [("| run | EM | F1 | Hit | format ok | relevance exact | relevance overlap | relevance precision | "
                 "relevance recall | LLM judge |"), "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
                f"| {label} | " + " | ".join(_pct(m[name]) for name in ARENA_MEASURES)
                + f" | {_pct(m['judge']) if judged else ''} |"]
        for system, by_source in ARENA_TABLE3.items():
            for source in sources:
                if source in by_source:
                    em, f1, lj = by_source[source]
                    rows.append(f"| ARENA paper (Table 3), {system}, {source} | {_pct(em)} | {_pct(f1)} "
                                f"| | | | | | | {_pct(lj)} (GPT-4o) |")
    else:
        judged = all("judge" in m for m in metrics["k"].values()) and bool(metrics["k"])
        extra = (" LLM judge |", " --- |") if judged else ("", "")
        rows = ["| run | k | EM | F1 | Hit | answer recall | support recall | all support in top-k |" + extra[0],
                "| --- | --- | --- | --- | --- | --- | --- | --- |" + extra[1]]
        for k, m in metrics["k"].items():
            rows.append(f"| {label} | {k} | " + " | ".join(_pct(m[name]) for name in MEASURES) + " |"
                        + (f" {_pct(m['judge'])} |" if judged else ""))
        if str(config.get("selector", "")).startswith("barrag") or _is_barrag(config):
            for name, em in BARRAG_TABLE1.items():
                rows.append(f"| BAR-RAG paper (Table 1, average EM of 7 QA sets, Qwen2.5-7B): {name} | 5 | "
                            f"{em:.2f} | | | | | |")
        else:
            for source in sources:
                for name, em, f1 in PAPER_RRPO.get(source, ()):
                    rows.append(f"| RRPO paper, {source}: {name} | 3 | {em:.2f} | {f1:.2f} | | | | |")
    if metrics.get("selector_statuses"):
        rows += ["", "selector outputs: " + ", ".join(f"{k} {v}" for k, v in metrics["selector_statuses"].items())]
    return "\n".join(rows)


def compare_runs(a: Path, b: Path, k: int | str, measures: Sequence[str] = ("em", "f1", "hit"),
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
