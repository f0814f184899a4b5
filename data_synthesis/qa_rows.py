"""QA items -> verl RL rows for BAR-RAG (selector, generator) and ARENA, written as ``rearank synth`` writes.

One row per question. The prompt comes from the same renderer inference uses (:mod:`rearank.methods.barrag.prompt`,
:mod:`rearank.methods.arena.prompt`); the ground truth is one JSON string holding what the mode's reward needs:

* ``barrag-selector``: the item's first stage -- its own paragraphs ranked by Lucene BM25 (rearank.data.bm25: k1 0.9,
  b 0.4, title and text), or with ``--corpus`` the BM25 top ``--depth`` of a whole corpus -- the top 25 shown as
  ``Doc [i]``; ground truth ``{"question", "answers", "docs": [{"title",
  "text"}], "scores": [first-stage score of each shown doc], "supporting": [1-based ids]}`` -- the reward re-renders the reader
  prompt from ``docs`` and takes the relevance term from ``scores``.
* ``barrag-generator``: the evidence a selector chose (``--evidence`` JSONL of ``{"qid", "pids"}``), else the BM25
  top 5 of the first stage; ground truth ``{"answers", "supporting"}``.
* ``arena``: the item's paragraphs in their given order (with ``--corpus``: the retrieval order), 10 (MuSiQue: 20); ground truth ``{"answers",
  "supporting": [1-based ids of the shown supporting paragraphs]}``. Items with no supporting paragraph among the
  shown ones are skipped (counted).

Files: ``train.parquet``, ``val.parquet`` (questions split by a seeded hash, as ``rearank synth`` splits queries),
``stats.json``, staged and renamed into place together.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from data_synthesis.sampling import split_queries
from data_synthesis.stats import recommended_max_prompt_length, token_summary
from data_synthesis.writers import RL_SCHEMA, staged_outputs
from rearank.errors import FormatError, RearankError
from rearank.io.files import iter_json_lines
from rearank.methods.arena.prompt import arena_messages, n_references
from rearank.methods.barrag.prompt import SELECT_K, SELECTOR_CANDIDATES, generator_messages, selector_messages
from rearank.types import Passage, QAItem

MODES = ("barrag-selector", "barrag-generator", "arena")
ABILITY = {"barrag-selector": "evidence-selection", "barrag-generator": "rag-qa", "arena": "rag-qa"}

#: The verl RL row of a QA question: the listwise rows' columns (:data:`data_synthesis.writers.RL_SCHEMA`), with QA
#: metadata in ``extra_info``.
QA_RL_SCHEMA = pa.schema([
    *(field for field in RL_SCHEMA if field.name != "extra_info"),
    ("extra_info", pa.struct([
        ("qid", pa.string()),
        ("source", pa.string()),
        ("pids", pa.list_(pa.string())),
        ("split", pa.string()),
        ("index", pa.int64()),
    ])),
])

def first_stage(items: Sequence[QAItem], run: Mapping[str, Sequence[tuple[str, float]]] | None = None
                ) -> dict[str, list[tuple[Passage, float]]]:
    """qid -> the item's passages with their first-stage scores, best first: from ``run`` (open retrieval: the
    items' passages are already its candidates, in its order), else Lucene BM25 over each item's own paragraphs
    (:func:`rearank.rag.retrieval.rank_own_passages`)."""
    if run is None:
        from rearank.rag.retrieval import rank_own_passages

        return {item.qid: ranked for item, ranked in zip(items, rank_own_passages(items))}
    out = {}
    for item in items:
        scores = dict(run.get(item.qid, ()))
        out[item.qid] = [(p, float(scores.get(p.pid, 0.0))) for p in item.passages]
    return out


def load_evidence(path: str | Path) -> dict[str, list[str]]:
    """``{"qid": ..., "pids": [...]}`` lines -> qid -> pids (a selector run's choices)."""
    evidence: dict[str, list[str]] = {}
    for line, record in iter_json_lines(path):
        qid, pids = record.get("qid"), record.get("pids")
        if not isinstance(qid, str) or not isinstance(pids, list) or not all(isinstance(p, str) for p in pids):
            raise FormatError(path, line, 'expected {"qid": "...", "pids": ["...", ...]}')
        evidence[qid] = pids
    return evidence


@dataclass(frozen=True)
class QARowsConfig:
    mode: str
    val_fraction: float = 0.1
    seed: int = 0
    data_source: str = ""
    candidates: int = SELECTOR_CANDIDATES
    evidence_k: int = SELECT_K
    max_passage_tokens: int | str | None = None  # a passage budget: tokens (int) or '400c', '300w', ...

    def check(self) -> None:
        if self.mode not in MODES:
            raise RearankError(f"unknown QA mode {self.mode!r}; choose one of {', '.join(MODES)}")
        if not 0.0 <= self.val_fraction < 1.0:
            raise RearankError(f"--val-fraction must be in [0, 1), got {self.val_fraction}")


def _row(item: QAItem, config: QARowsConfig, evidence: Mapping[str, list[str]] | None,
         tokenizer: Any, ranked: list[tuple[Passage, float]]) -> tuple[list[dict], dict, list[str]] | str:
    """(messages, ground truth, shown pids) for one item (``ranked``: its first stage), or why it is skipped."""
    cut = {"max_passage_tokens": config.max_passage_tokens, "tokenizer": tokenizer}
    if config.mode == "barrag-selector":
        ranked = ranked[: config.candidates]
        shown = [p for p, _ in ranked]
        truth = {"question": item.question, "answers": list(item.answers),
                 "docs": [{"title": p.title, "text": p.text} for p in shown],
                 "scores": [round(s, 4) for _, s in ranked],
                 "supporting": [i for i, p in enumerate(shown, 1) if p.pid in item.supporting]}
        return selector_messages(item.question, shown, **cut), truth, [p.pid for p in shown]
    if config.mode == "barrag-generator":
        if evidence is not None:
            if item.qid not in evidence:
                return "no_evidence"
            by_pid = {p.pid: p for p in item.passages}
            if any(pid not in by_pid for pid in evidence[item.qid]):
                return "unknown_evidence_pid"
            shown = [by_pid[pid] for pid in evidence[item.qid]]
        else:
            shown = [p for p, _ in ranked[: config.evidence_k]]
        truth = {"answers": list(item.answers), "n_docs": len(shown),
                 "supporting": [i for i, p in enumerate(shown, 1) if p.pid in item.supporting]}
        return generator_messages(item.question, shown, **cut), truth, [p.pid for p in shown]
    shown = list(item.passages[: n_references(item.source)])
    supporting = [i for i, p in enumerate(shown, 1) if p.pid in item.supporting]
    if not supporting:
        return "no_supporting"
    truth = {"answers": list(item.answers), "supporting": supporting}
    return arena_messages(item.question, shown, **cut), truth, [p.pid for p in shown]


def qa_rows(items: Iterable[QAItem], config: QARowsConfig, evidence: Mapping[str, list[str]] | None = None,
            tokenizer: Any = None, run: Mapping[str, Sequence[tuple[str, float]]] | None = None
            ) -> tuple[list[dict], Counter]:
    """The RL rows (``extra_info.split`` set) and the count of skipped items by reason.

    ``run``: the items come from open retrieval (:func:`rearank.rag.retrieval.retrieve`) and this is their first
    stage; without it the BAR-RAG modes rank each item's own paragraphs by BM25."""
    config.check()
    items = list(items)
    duplicates = [qid for qid, n in Counter(i.qid for i in items).items() if n > 1]
    if duplicates:
        raise RearankError(f"question ids repeat across the inputs (e.g. {duplicates[0]!r}); give distinct files")
    val = split_queries([i.qid for i in items], config.val_fraction, config.seed)
    ranked = first_stage(items, run) if config.mode != "arena" else {}
    rows, skipped = [], Counter()
    for item in items:
        made = _row(item, config, evidence, tokenizer, ranked.get(item.qid, []))
        if isinstance(made, str):
            skipped[made] += 1
            continue
        messages, truth, pids = made
        rows.append({
            "data_source": config.data_source or f"{config.mode}/{item.source or 'qa'}",
            "prompt": messages,
            "ability": ABILITY[config.mode],
            "reward_model": {"style": "rule", "ground_truth": json.dumps(truth, ensure_ascii=False)},
            "extra_info": {"qid": item.qid, "source": item.source, "pids": pids,
                           "split": "val" if item.qid in val else "train", "index": 0},
        })
    return rows, skipped


def write_qa_parquet(path: Path, rows: list[dict]) -> None:
    """Write QA RL rows with :data:`QA_RL_SCHEMA` (an empty split still gets a valid file)."""
    pq.write_table(pa.Table.from_pylist(rows, schema=QA_RL_SCHEMA), path)


def prompt_tokens(rows: Sequence[dict], tokenizer: Any) -> list[int]:
    """Chat-prompt token counts as verl counts them (chat template with the generation prompt)."""
    texts = [tokenizer.apply_chat_template(r["prompt"], add_generation_prompt=True, tokenize=False) for r in rows]
    return [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]] if texts else []


def write_qa_outputs(rows: list[dict], skipped: Counter, output_dir: str | Path, config: QARowsConfig,
                     inputs: Sequence[str], tokenizer: Any = None, tokenizer_name: str = "none") -> dict:
    """train/val parquet (``extra_info.index`` numbered per split) and stats.json, renamed into place together."""
    splits = {name: [r for r in rows if r["extra_info"]["split"] == name] for name in ("train", "val")}
    for split_rows in splits.values():
        for index, row in enumerate(split_rows):
            row["extra_info"]["index"] = index
    stats: dict[str, Any] = {
        "mode": config.mode, "inputs": list(inputs), "questions": len(rows) + sum(skipped.values()),
        "rows": {name: len(r) for name, r in splits.items()}, "skipped": dict(skipped),
        "sources": dict(Counter(r["extra_info"]["source"] for r in rows)), "seed": config.seed,
        "val_fraction": config.val_fraction,
    }
    if tokenizer is not None:
        lengths = prompt_tokens(rows, tokenizer)
        stats["prompt_tokens"] = {"tokenizer": tokenizer_name, **token_summary(lengths),
                                  "recommended_max_prompt_length": recommended_max_prompt_length(max(lengths, default=0))}
    with staged_outputs(output_dir) as outputs:
        for name, split_rows in splits.items():
            write_qa_parquet(outputs.path(f"{name}.parquet"), split_rows)
        outputs.path("stats.json").write_text(json.dumps(stats, indent=1) + "\n", encoding="utf-8")
    stats["outputs"] = ["train.parquet", "val.parquet", "stats.json"]
    return stats
