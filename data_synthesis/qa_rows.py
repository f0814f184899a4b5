"""QA items -> verl RL rows of a ``qa`` method card (BAR-RAG selector and generator, ARENA, a plugin's), written
as ``rearank synth`` writes.

One row per question: the card's ``rows`` builds its prompt with the renderer inference uses and the ground truth
its reward reads (:mod:`rearank.methods.barrag.rows`, :mod:`rearank.methods.arena.rows`). A card that reads the
first stage gets the item's own paragraphs ranked by Lucene BM25 (rearank.data.bm25: k1 0.9, b 0.4, title and
text), or with ``--corpus`` the BM25 top ``--depth`` of a whole corpus; a generator card may read a selector's
choices instead (``--evidence`` JSONL of ``{"qid", "pids"}``). A question the card skips is counted by reason.

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
from rearank.methods.card import QARow, card, cards
from rearank.types import Passage, QAItem


def qa_methods() -> list[str]:
    """The cards whose rows ``rearank synth`` builds from QA files."""
    return [c.name for c in cards() if c.synth == "qa"]


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
    method: str
    val_fraction: float = 0.1
    seed: int = 0
    data_source: str = ""
    max_passage_tokens: int | str | None = None  # a passage budget: tokens (int) or '400c', '300w', ...

    def check(self) -> None:
        if card(self.method).synth != "qa":
            raise RearankError(f"method {self.method!r} builds no rows from QA files; choose one of "
                               f"{', '.join(qa_methods())}")
        if not 0.0 <= self.val_fraction < 1.0:
            raise RearankError(f"--val-fraction must be in [0, 1), got {self.val_fraction}")


def qa_rows(items: Iterable[QAItem], config: QARowsConfig, evidence: Mapping[str, list[str]] | None = None,
            tokenizer: Any = None, run: Mapping[str, Sequence[tuple[str, float]]] | None = None
            ) -> tuple[list[dict], Counter]:
    """The RL rows (``extra_info.split`` set) and the count of skipped items by reason.

    ``run``: the items come from open retrieval (:func:`rearank.rag.retrieval.retrieve`) and this is their first
    stage; without it a card that reads the first stage gets each item's own paragraphs ranked by BM25."""
    config.check()
    items = list(items)
    duplicates = [qid for qid, n in Counter(i.qid for i in items).items() if n > 1]
    if duplicates:
        raise RearankError(f"question ids repeat across the inputs (e.g. {duplicates[0]!r}); give distinct files")
    val = split_queries([i.qid for i in items], config.val_fraction, config.seed)
    method = card(config.method)
    ranked = first_stage(items, run) if method.first_stage else {}
    rows, skipped = [], Counter()
    for item in items:
        if evidence is not None and item.qid not in evidence:
            skipped["no_evidence"] += 1
            continue
        made = method.rows(QARow(item, ranked.get(item.qid, ()), None if evidence is None else evidence[item.qid],
                                 config.max_passage_tokens, tokenizer))
        if isinstance(made, str):
            skipped[made] += 1
            continue
        messages, truth, pids = made
        rows.append({
            "data_source": config.data_source or f"{config.method}/{item.source or 'qa'}",
            "prompt": messages,
            "ability": method.ability,
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
        "method": config.method, "inputs": list(inputs), "questions": len(rows) + sum(skipped.values()),
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
