"""BAR-RAG training rows (``rearank synth --method barrag-selector|barrag-generator``): one question's prompt, from
the renderer inference uses, and the ground truth its reward reads.

* selector: the question's first stage, its top 25 shown as ``Doc [i]``; ground truth ``{"question", "answers",
  "docs": [{"title", "text"}], "scores": [first-stage score of each shown doc], "supporting": [1-based ids]}`` --
  the reward re-renders the reader prompt from ``docs`` and takes the relevance term from ``scores``;
* generator: the evidence a selector chose (``--evidence``), else the first stage's top 5; ground truth
  ``{"answers", "n_docs", "supporting"}``.
"""

from __future__ import annotations

from typing import Any

from rearank.methods.barrag.prompt import SELECT_K, SELECTOR_CANDIDATES, generator_messages, selector_messages
from rearank.methods.card import QARow


def _supporting(shown: list, row: QARow) -> list[int]:
    return [i for i, p in enumerate(shown, 1) if p.pid in row.item.supporting]


def selector_row(row: QARow) -> tuple[list, dict[str, Any], list[str]]:
    item, ranked = row.item, list(row.ranked)[:SELECTOR_CANDIDATES]
    shown = [p for p, _ in ranked]
    truth = {"question": item.question, "answers": list(item.answers),
             "docs": [{"title": p.title, "text": p.text} for p in shown],
             "scores": [round(s, 4) for _, s in ranked], "supporting": _supporting(shown, row)}
    return selector_messages(item.question, shown, **row.cut), truth, [p.pid for p in shown]


def generator_row(row: QARow) -> tuple[list, dict[str, Any], list[str]] | str:
    item = row.item
    if row.evidence is not None:
        by_pid = {p.pid: p for p in item.passages}
        if any(pid not in by_pid for pid in row.evidence):
            return "unknown_evidence_pid"
        shown = [by_pid[pid] for pid in row.evidence]
    else:
        shown = [p for p, _ in list(row.ranked)[:SELECT_K]]
    truth = {"answers": list(item.answers), "n_docs": len(shown), "supporting": _supporting(shown, row)}
    return generator_messages(item.question, shown, **row.cut), truth, [p.pid for p in shown]
