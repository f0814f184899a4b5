"""RAG evaluation: select passages, read the top-k, score the answers; per-item JSONL, metrics.json, a table.

An output folder holds ``config.json`` (what was run), ``items.jsonl`` (one record per question, appended and
flushed as each chunk of questions finishes), ``metrics.json`` and ``table.md``. ``resume=True`` keeps the
finished records (a torn last line is dropped) and runs the rest; it refuses a folder made with another
configuration. Questions go through the selector and the reader ``chunk`` at a time, so the reader sees the
prompts of many questions (and every k) in one batch. A reader card with a :class:`~rearank.methods.card.Reading`
(ARENA) is read once over the passages it declares and scored by its own measures, under its name instead of each k.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from rearank.errors import RearankError
from rearank.io.files import atomic_write
from rearank.io.jsonl_log import JsonlAppender, read_jsonl_log
from rearank.measures.answers import answer_recall, exact_match, hit, support_recall, token_f1
from rearank.measures.significance import paired_t_p, randomization_p
from rearank.methods.card import Card, Published, card
from rearank.rag.config import DEFAULT_PUBLISHED
from rearank.rag.readers import RULE_READERS, GoldReader, Reader, ReaderOutput, reader_card
from rearank.rag.selectors import Selector, selector_card
from rearank.types import Passage, QAItem

MEASURES = ("em", "f1", "hit", "answer_recall", "support_recall", "support_all")


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
            **failed_read(outputs[k]),
        }
    return {**_base_record(item, ranking), "k": per_k}


def failed_read(output: ReaderOutput) -> dict[str, Any]:
    """What a record says of a read the reader failed (nothing for a read that did not fail)."""
    if not output.failed:
        return {}
    return {"reader_failed": True, **({"reader_error": output.error} if output.error else {})}


def first_reader_error(records: Iterable[dict]) -> str:
    """The cause of the first failed read of ``records`` ("" when none says)."""
    return next((row.get("reader_error", "") for r in records for row in r["k"].values()
                 if row.get("reader_failed")), "")


def shown(reader: Card, item: QAItem, ranking: Sequence[Passage]) -> tuple[Passage, ...]:
    """The passages a reading card reads once: the first ``reading.shown`` of the selector's order."""
    return tuple(ranking[: reader.reading.shown(item)])


def reading_record(reader: Card, item: QAItem, ranking: Sequence[Passage], output: ReaderOutput) -> dict[str, Any]:
    """The JSON record of one question read once by a reading card (its measures, under its name)."""
    view = shown(reader, item, ranking)
    scores = reader.reading.score(item, view, output.response, reader.reading.style)
    return {**_base_record(item, ranking),
            "k": {reader.name: {"shown": [p.pid for p in view], "response": output.response,
                                **scores, **failed_read(output)}}}


def measures_of(key: str) -> tuple[str, ...]:
    """The measures of a record key: a k's, or a reading card's (the key is its name)."""
    return MEASURES if key.isdigit() else card(key).reading.measures


def read_records(path: Path, repair: bool = False) -> dict[str, dict]:
    """Records of an ``items.jsonl`` by qid; a torn last line is dropped (and cut from the file if ``repair``)."""
    records = read_jsonl_log(path, lambda r: (str(r["qid"]), r["k"].items()), "rag eval", "start a new --output-dir",
                             repair)
    return {str(r["qid"]): r for r in records}


def aggregate(records: Iterable[dict], keys: Sequence[int | str]) -> dict[str, Any]:
    """Mean of every measure per k (``{"3": {"em": ..., ...}}``, or a reading card's ``{"arena": ...}``) over the records, their
    count, the reads the reader failed (per k; scored as wrong answers) and the count of each selector parse status
    (BAR-RAG selectors)."""
    records = list(records)
    out: dict[str, Any] = {"questions": len(records), "k": {}}
    for key in map(str, keys):
        rows = [r["k"][key] for r in records if key in r["k"]]
        measures = measures_of(key)
        if rows and all("judge" in row for row in rows):
            measures = (*measures, "judge")
        out["k"][key] = {m: float(np.mean([row[m] for row in rows])) if rows else 0.0 for m in measures}
        out["k"][key]["reader_failed"] = sum(bool(row.get("reader_failed")) for row in rows)
    statuses = Counter(r["selector"]["status"] for r in records if "selector" in r)
    if statuses:
        out["selector_statuses"] = dict(sorted(statuses.items()))
    return out


class RagEvaluation:
    """One ``rag eval`` run into ``output`` (a folder); a resume keeps its finished questions (those with a failed
    read are read again)."""

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
        for qid in [q for q, r in self.records.items() if any(row.get("reader_failed") for row in r["k"].values())]:
            del self.records[qid]  # a question with a failed read is read again
        if not resume and self.items_path.is_file():
            self.items_path.unlink()
        with atomic_write(config_path) as handle:
            json.dump(config, handle, indent=2)
            handle.write("\n")

    def run(self, items: Sequence[QAItem], selector: Selector, reader: Reader, ks: Sequence[int],
            style: str = "squad", chunk: int = 32, progress: bool = True, reading: Card | None = None,
            judge: Any = None) -> dict[str, Any]:
        """Evaluate the items not yet in ``items.jsonl``; write metrics.json and table.md over all of them.

        ``reading``: the reader's card when it has a :class:`~rearank.methods.card.Reading` (``--template arena``:
        the first 10, MuSiQue 20, of the selector's order read once and scored by the card's measures; ``ks`` is
        not used). ``judge`` (:class:`rearank.rag.judge.Judge`): each answer (the response when no
        answer was extracted) is also judged by an LLM against the gold answers (``judge`` in records and means).
        """
        keys: list[int | str] = [reading.name] if reading is not None else sorted(set(ks))
        todo = [item for item in items if item.qid not in self.records]
        bar = tqdm(total=len(items), initial=len(items) - len(todo), unit="question", desc="rag eval",
                   disable=not progress, dynamic_ncols=True)
        details = getattr(selector, "details", None)
        with JsonlAppender(self.items_path) as log:
            try:
                for start in range(0, len(todo), chunk):
                    batch = todo[start:start + chunk]
                    records = self._evaluate(batch, selector, reader, keys, style, reading)
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
                  style: str, reading: Card | None = None) -> list[dict[str, Any]]:
        rankings = selector.rank(batch)
        if reading is not None:
            pairs = [(item, shown(reading, item, ranking)) for item, ranking in zip(batch, rankings)]
        else:
            pairs = [(item, ranking[:k]) for item, ranking in zip(batch, rankings) for k in keys]
        answers = reader.read(pairs)
        if len(answers) != len(pairs):
            raise RearankError(f"reader {reader.name!r} gave {len(answers)} answers for {len(pairs)} contexts")
        if reading is not None:
            return [reading_record(reading, item, ranking, answer)
                    for item, ranking, answer in zip(batch, rankings, answers)]
        n = len(keys)
        return [item_record(item, ranking, keys, dict(zip(keys, answers[i * n:(i + 1) * n])), style)
                for i, (item, ranking) in enumerate(zip(batch, rankings))]


def _pct(value: float) -> str:
    return f"{100 * value:.2f}"


#: Column headers of measures that are not their names with spaces.
_HEADERS = {"em": "EM", "f1": "F1", "hit": "Hit"}


def _reading(metrics: dict[str, Any]) -> str | None:
    """The reading card's name of a reading run's metrics, None for a per-k run."""
    return next((key for key in metrics["k"] if not key.isdigit()), None)


def published_for(metrics: dict[str, Any], config: dict[str, Any]) -> Published | None:
    """The published figures a run is printed beside: its reading card's (a reading run), else the first held by
    its reader's card (``--template``; one read by each k) or its selector's card, else the default card's
    (:data:`~rearank.rag.config.DEFAULT_PUBLISHED`)."""
    reading = _reading(metrics)
    if reading is not None:
        return card(reading).published
    template = config.get("template")
    reader = reader_card(template) if template is not None else None
    cards = [reader if reader is not None and reader.reading is None else None,
             selector_card(str(config.get("selector", "")))]
    return next((c.published for c in cards if c is not None and c.published is not None),
                card(DEFAULT_PUBLISHED).published)


def published_rows(published: Published, columns: Sequence[str], sources: Sequence[str], k_column: bool) -> list[str]:
    """The rows of ``published`` for a run on ``sources`` under a table whose measure columns are ``columns``
    (after the run's and, if ``k_column``, the k's): the paper's values in the columns it gives, the rest blank."""
    out = []
    for row in published.rows:
        if row.source is not None and row.source not in sources:
            continue
        given = dict(zip(published.measures, row.values))
        cells = [str(row.k) if row.k is not None else ""] if k_column else []
        for name in columns:
            note = f" ({published.notes[name]})" if name in published.notes else ""
            cells.append(f"{published.scale * given[name]:.2f}{note}" if name in given else "")
        label = published.label.format(paper=published.paper, system=row.system, source=row.source)
        out.append(f"| {label} |" + "".join(f" {cell} |" if cell else " |" for cell in cells))
    return out


def comparability(published: Published, config: dict[str, Any]) -> list[str]:
    """What the table's published rows are (the full citation) and what of them compares with ours."""
    reader = config.get("reader", GoldReader.name)
    if reader in RULE_READERS:
        what = (f"Not comparable: our rows read with the {reader} reader, a rule that gives a gold answer when the "
                "passages it reads hold one, so their EM and F1 measure whether the answer was retrieved (an upper "
                f"bound for any reader), while the {published.paper}'s figures are a language model's answers. "
                "Compare our runs with each other (answer recall, Hit); compare with the paper only a run with an "
                "LLM reader.")
    else:
        what = (f"Comparable in kind only: our rows read with {config.get('reader_model') or reader} on this sample, "
                f"the {published.paper}'s with its own reader model, corpus, first stage and full test sets; compare "
                "the gaps between rows (what a reranker or selector adds), not the values.")
    return ["", *([f"Published rows: {published.citation}."] if published.citation else []), what]


def markdown_table(metrics: dict[str, Any], config: dict[str, Any], sources: Sequence[str] = ()) -> str:
    """Our figures (x100, on this sample), then the published figures of the paper the run follows
    (:func:`published_for`; each a different setting from ours: see docs/rag.md)."""
    label = f"{config.get('label', 'ours')} (ours, on this sample, n={metrics['questions']})"
    reading = _reading(metrics)
    if reading is not None:
        m, measures = metrics["k"][reading], measures_of(reading)
        judged = "judge" in m
        rows = ["| run | " + " | ".join(_HEADERS.get(name, name.replace("_", " ")) for name in measures)
                + " | LLM judge |", "| --- |" + " --- |" * (len(measures) + 1),
                f"| {label} | " + " | ".join(_pct(m[name]) for name in measures)
                + f" | {_pct(m['judge']) if judged else ''} |"]
        judge_column = True
    else:
        measures = MEASURES
        judged = judge_column = all("judge" in m for m in metrics["k"].values()) and bool(metrics["k"])
        extra = (" LLM judge |", " --- |") if judged else ("", "")
        rows = ["| run | k | EM | F1 | Hit | answer recall | support recall | all support in top-k |" + extra[0],
                "| --- | --- | --- | --- | --- | --- | --- | --- |" + extra[1]]
        for k, m in metrics["k"].items():
            rows.append(f"| {label} | {k} | " + " | ".join(_pct(m[name]) for name in MEASURES) + " |"
                        + (f" {_pct(m['judge'])} |" if judged else ""))
    published = published_for(metrics, config)
    if published is not None:
        judge = ("judge",) if judge_column and "judge" in published.measures else ()
        theirs = published_rows(published, (*measures, *judge), sources, k_column=reading is None)
        rows += theirs + (comparability(published, config) if theirs else [])
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
