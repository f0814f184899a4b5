"""The trace viewer: one self-contained HTML page of a reranking run (``rearank view``).

Per query it shows the first-stage top-N beside the final top-N (moved passages highlighted, judged
relevance when qrels are given) and every window: its reasoning, parsed permutation and parse status.
Benchmark plots (PNG files) are embedded as base64 images. The page needs no server and no network: CSS
and JavaScript are inline, the data sits in JSON blocks (every ``<`` escaped) and is inserted as text
nodes, never as HTML, so model output cannot run in the page. A query's windows stay unparsed JSON until
the query is opened, so large runs load quickly.

Windows are mapped to the passages they presented by replaying the traces from the first-stage order
(listwise runs: each trace's permutation applied to ``order[start:end]``). When the replay does not give
the run's order (a groupwise run, or a first stage other than the one reranked), windows are shown
without passage ids.
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rearank.io.files import PathLike, atomic_write
from rearank.methods.listwise.answer import apply_permutation
from rearank.types import WindowTrace

PAGE = Path(__file__).with_name("page.html")
#: Characters of a passage kept in the page.
PASSAGE_CHARS = 700


@dataclass
class ViewInput:
    """Everything the page shows; only ``run`` is required."""

    run: Mapping[str, Sequence[str]]  # qid -> docids, final order
    traces: Mapping[str, Sequence[WindowTrace]] = field(default_factory=dict)
    first_stage: Mapping[str, Sequence[str]] | None = None
    first_stage_label: str = "first stage"
    topics: Mapping[str, str] = field(default_factory=dict)
    docs: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    qrels: Mapping[str, Mapping[str, int]] | None = None
    stats: Mapping[str, Any] | None = None
    plots: Sequence[Path] = ()
    title: str = "rearank run"
    top: int = 20


def undo_windows(final: Sequence[str], traces: Sequence[WindowTrace]) -> list[str]:
    """The order before a listwise run's windows, recovered from its final order by undoing them last to first."""
    order = list(final)
    for trace in reversed(traces):
        after = order[trace.start:trace.end]
        before = list(after)
        for position, source in enumerate(trace.permutation):
            before[source] = after[position]
        order[trace.start:trace.end] = before
    return order


def replay(first: Sequence[str], traces: Sequence[WindowTrace]) -> tuple[list[list[str]], list[str]]:
    """The docids each window presented (in presented order) and the order after all windows."""
    order = list(first)
    shown = []
    for trace in traces:
        window = order[trace.start:trace.end]
        shown.append(window)
        try:
            order[trace.start:trace.end] = apply_permutation(window, trace.permutation)
        except ValueError:  # not a permutation of this window: the traces do not replay on this order
            return shown, []
    return shown, order


def _ndcg10(qrels: Mapping[str, Mapping[str, int]], run: Mapping[str, Sequence[str]]) -> dict[str, float]:
    from rearank.measures.ir import evaluate

    judged = {q: qrels[q] for q in run if qrels.get(q)}
    if not judged:
        return {}
    ranked = {q: [(d, float(len(docids) - i)) for i, d in enumerate(docids)] for q, docids in run.items() if q in judged}
    return {q: m["ndcg_cut_10"] for q, m in evaluate(judged, ranked, ["nDCG@10"]).per_query.items()}


def _query_view(data: ViewInput, qid: str, ndcg: tuple[dict, dict]) -> tuple[dict[str, Any], list[dict], set[str]]:
    final = list(data.run[qid])
    traces = list(data.traces.get(qid, ()))
    first = list(data.first_stage[qid]) if data.first_stage is not None and qid in data.first_stage else None
    shown: list[list[str]] | None = None
    if first is not None and traces:
        windows, replayed = replay(first, traces)
        shown = windows if replayed and replayed[:len(final)] == final[:len(replayed)] else None
    judged = (data.qrels or {}).get(qid, {})
    rel = (lambda d: judged.get(d)) if data.qrels is not None else (lambda d: None)
    top_final = final[:data.top]
    top_first = (first or [])[:data.top]
    query = {
        "qid": qid, "text": data.topics.get(qid, ""),
        "final": [[d, rel(d)] for d in top_final],
        "first": [[d, rel(d)] for d in top_first],
        "first_rank": {d: i + 1 for i, d in enumerate(first or []) if d in set(top_final)},
        "final_rank": {d: i + 1 for i, d in enumerate(final) if d in set(top_first)},
        "ndcg_before": ndcg[0].get(qid), "ndcg_after": ndcg[1].get(qid),
        "windows": len(traces), "not_ok": sum(t.status != "ok" for t in traces),
        "mapped": shown is not None,
    }
    windows = [{"start": t.start, "end": t.end, "pass": t.pass_index, "round": t.round,
                "partition": t.partition, "status": t.status,
                "permutation": list(t.permutation), "raw": t.raw_output, "prompt_tokens": t.prompt_tokens,
                "completion_tokens": t.completion_tokens, "latency_s": round(t.latency_s, 3),
                "docids": [[d, rel(d)] for d in shown[i]] if shown is not None else None}
               for i, t in enumerate(traces)]
    return query, windows, set(top_final) | set(top_first)


def _script_json(value: Any) -> str:
    """JSON for a ``<script type="application/json">`` block: every ``<``, ``>`` and ``&`` escaped."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render(data: ViewInput) -> str:
    """The page as one HTML string."""
    ndcg = ({}, {})
    if data.qrels:
        ndcg = (_ndcg10(data.qrels, data.first_stage) if data.first_stage else {}, _ndcg10(data.qrels, data.run))
    queries, blocks, used = [], [], set()
    for index, qid in enumerate(data.run):
        query, windows, docids = _query_view(data, qid, ndcg)
        queries.append(query)
        used |= docids
        blocks.append(f'<script type="application/json" id="w{index}">{_script_json(windows)}</script>')
    passages = {}
    for docid in sorted(used):
        if docid in data.docs:
            title, text = data.docs[docid]
            passages[docid] = {"title": title, "text": text[:PASSAGE_CHARS] + ("…" if len(text) > PASSAGE_CHARS else "")}
    plots = [{"name": p.name, "png": base64.b64encode(p.read_bytes()).decode("ascii")} for p in data.plots]
    meta = {"title": data.title, "first_stage_label": data.first_stage_label, "has_qrels": data.qrels is not None,
            "has_first": data.first_stage is not None, "top": data.top, "stats": data.stats or {},
            "queries": queries, "passages": passages, "plots": plots}
    page = PAGE.read_text(encoding="utf-8")
    page = page.replace("{{TITLE}}", html.escape(data.title))
    page = page.replace("{{META}}", _script_json(meta))
    return page.replace("{{WINDOWS}}", "\n".join(blocks))


def write_view(path: PathLike, data: ViewInput) -> Path:
    """Write the page (write-then-rename) and return its path."""
    with atomic_write(path) as handle:
        handle.write(render(data))
    return Path(path)
