"""Multi-sampling initial-state expansion: many (query, passage set, initial order) states per judged query.

For each query: draw K distinct sets of n passages from its top-k candidates (:mod:`.sampling`), label and
filter them (:mod:`.filters`), prompt each kept set as the method's card declares (:mod:`.set_prompts`: its
ranking template, or its method's own prompt), split by query, and write verl RL parquet (and optionally SFT
JSONL) with a stats report (:mod:`.writers`, :mod:`.stats`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from data_synthesis.filters import FILTERS, FilterConfig, KeptSet, labels_for, query_ideal_dcg, rejection, score_set
from data_synthesis.sampling import ORDERS, draw_sets, split_queries
from data_synthesis.set_prompts import set_prompts
from data_synthesis.stats import recommended_max_prompt_length, render_markdown, spread, token_summary
from data_synthesis.writers import staged_outputs, write_jsonl, write_parquet, write_text
from rearank.errors import RearankError
from rearank.methods.card import RANK, card, cards
from rearank.prompts import as_budget
from rearank.types import Request

#: What to do with a query that has fewer candidates than the set size.
SMALL_QUERY_MODES = ("use-all", "skip")
#: Grades of a query's judged pool kept in the ground truth (the highest ones: enough for its ideal DCG@10,
#: which the released reward normalises by).
POOL_GRADES = 10


@dataclass(frozen=True)
class SynthConfig:
    """Everything that decides the synthesized data (echoed in ``stats.json``)."""

    samples_per_query: int = 50
    set_size: int = 20
    seed: int = 0
    val_fraction: float = 0.1
    order: str = "bm25"
    top_k: int = 100
    filters: FilterConfig = field(default_factory=FilterConfig)
    small_queries: str = "use-all"
    #: A ranking card that synthesizes sampled sets (``synth="sets"``): listwise (the Rearank permutation prompt),
    #: groupwise (the GroupRank JSON-score prompt), or a plugin's.
    method: str = "listwise"
    template: str | None = None
    passage_budget: str | None = None
    sft: bool = False
    data_source: str = "rearank/custom"
    #: The template's variant with (True) or without (False) reasoning; None: the template's own.
    reasoning: bool | None = None

    def check(self) -> None:
        """Raise RearankError naming the first invalid setting."""
        if self.samples_per_query < 1:
            raise RearankError(f"samples per query must be at least 1, got {self.samples_per_query}")
        if self.set_size < 2:
            raise RearankError(f"set size must be at least 2 (one passage has no ranking), got {self.set_size}")
        if self.top_k < self.set_size:
            raise RearankError(f"top-k ({self.top_k}) must be at least the set size ({self.set_size})")
        if not 0.0 <= self.val_fraction < 1.0:
            raise RearankError(f"validation fraction must be in [0, 1), got {self.val_fraction}")
        if self.order not in ORDERS:
            raise RearankError(f"order must be one of {', '.join(ORDERS)}, got {self.order!r}")
        if self.small_queries not in SMALL_QUERY_MODES:
            raise RearankError(f"small-queries must be one of {', '.join(SMALL_QUERY_MODES)}, "
                               f"got {self.small_queries!r}")
        methods = [c.name for c in cards(RANK) if c.synth == "sets"]
        if self.method not in methods:
            raise RearankError(f"method must be one of {', '.join(methods)}, got {self.method!r}")
        try:
            as_budget(self.passage_budget)
        except ValueError as err:
            raise RearankError(str(err)) from None


def sample_query(request: Request, judged: Mapping[str, int], config: SynthConfig, set_size: int) -> tuple[
    list[KeptSet], Counter
]:
    """Draw, label and filter one query's sets; returns the kept sets and counters of what happened."""
    qid = request.query.qid
    cands = request.candidates[: config.top_k]
    drawn = draw_sets(qid, len(cands), set_size, config.samples_per_query, config.seed, config.order)
    labels_all = labels_for([c.docid for c in cands], judged)
    pool_ideal = query_ideal_dcg(judged)
    pool = tuple(sorted((max(int(g), 0) for g in judged.values()), reverse=True)[:POOL_GRADES])
    counts: Counter = Counter(
        sets_drawn=len(drawn.sets), duplicate_draws=drawn.duplicates,
        queries_short=int(len(drawn.sets) < config.samples_per_query),
    )
    kept = []
    for index, positions in enumerate(drawn.sets):
        labels = tuple(labels_all[p] for p in positions)
        scores = score_set(labels, pool_ideal)
        reason = rejection(scores, config.filters)
        if reason:
            counts[f"rejected_{reason}"] += 1
            continue
        kept.append(KeptSet(qid, index, tuple(cands[p] for p in positions), labels, scores, pool))
    return kept, counts


def synthesize(
    requests: Sequence[Request],
    qrels: Mapping[str, Mapping[str, int]],
    output_dir: str | Path,
    config: SynthConfig = SynthConfig(),
    *,
    tokenizer: Any | None = None,
    tokenizer_name: str = "none",
    progress: bool = True,
    overwrite: bool = False,
    sources: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Synthesize RL training data from judged requests and write it to ``output_dir``; return the stats.

    Writes ``train.parquet``, ``val.parquet`` (verl RL rows), ``sft_{train,val}.jsonl`` with ``config.sft``,
    ``stats.json`` and ``stats.md``, all renamed into place only once every file is complete. ``tokenizer``
    (a Hugging Face tokenizer) truncates passages and measures prompt lengths; None cuts passages by words and
    skips the token statistics. ``sources`` (qid -> source name, for several judged sets at once) gives each
    row the data source ``rearank/<source>`` (unless ``config.data_source`` is set) and per-source counts in the
    stats; the train/val split is by query across all sources.
    """
    config.check()
    method = card(config.method)
    prompter = set_prompts(method, config, tokenizer)
    max_label = max((g for judged in qrels.values() for g in judged.values()), default=1)
    seen_qids = Counter(r.query.qid for r in requests)
    repeated = [qid for qid, n in seen_qids.items() if n > 1]
    if repeated:
        raise RearankError(f"{len(repeated)} query ids occur more than once in the input (first: {repeated[0]})")
    if not requests:
        raise RearankError("the run is empty: no query to sample from")
    if not any(qrels.get(r.query.qid) for r in requests):
        raise RearankError(
            f"none of the {len(requests)} queries has judgments in the qrels ({len(qrels)} judged queries); "
            "check that the run and the qrels belong to the same benchmark"
        )

    counts: Counter = Counter()
    kept: dict[str, list[KeptSet]] = {}
    for request in tqdm(requests, desc="sample", unit="query", disable=not progress, dynamic_ncols=True):
        judged = qrels.get(request.query.qid)
        n_cands = min(len(request.candidates), config.top_k)
        if not judged:
            counts["skipped_no_qrels"] += 1
            continue
        if n_cands < 2:
            counts["skipped_too_few"] += 1
            continue
        if n_cands < config.set_size:
            counts["small_queries"] += 1
            if config.small_queries == "skip":
                continue
        counts["sampled"] += 1
        sets, query_counts = sample_query(request, judged, config, min(config.set_size, n_cands))
        counts.update(query_counts)
        if sets:
            kept[request.query.qid] = sets

    if not kept:
        removed = ", ".join(f"{name} {counts[f'rejected_{name}']}" for name in FILTERS if counts[f"rejected_{name}"])
        raise RearankError(
            f"no set was kept: {counts['sets_drawn']} sets drawn from {counts['sampled']} queries "
            f"(removed: {removed or 'none'}); check the qrels grades or switch filters off (see --help)"
        )
    val_qids = split_queries(kept, config.val_fraction, config.seed)
    queries = {r.query.qid: r.query for r in requests}
    all_sets = [s for sets in kept.values() for s in sets]
    prompter.render(all_sets, progress)

    rows: dict[str, list[dict[str, Any]]] = {"train": [], "val": []}
    sft_rows: dict[str, list[dict[str, Any]]] = {"train": [], "val": []}
    prompts: list[list[dict]] = []
    for s in tqdm(all_sets, desc="render", unit="set", disable=not progress, dynamic_ncols=True):
        split = "val" if s.qid in val_qids else "train"
        messages = prompter.messages(queries[s.qid], s.candidates)
        prompts.append(messages)
        extra = {
            "qid": s.qid, "set_index": s.set_index, "docids": [c.docid for c in s.candidates],
            "set_ndcg10": s.scores.set_ndcg, "pool_ndcg10": s.scores.pool_ndcg,
            "split": split, "index": len(rows[split]), "query": queries[s.qid].text,
        }
        truth = {"labels": list(s.labels), "pool": list(s.pool)}
        rows[split].append({
            "data_source": config.data_source or f"rearank/{(sources or {}).get(s.qid, 'custom')}",
            "prompt": messages,
            "ability": method.ability,
            "reward_model": {"style": "rule", "ground_truth": json.dumps(truth)},
            "extra_info": extra,
        })
        if config.sft:
            sft_rows[split].append({"prompt": messages, "completion": [prompter.sft(s.labels, max_label)],
                                    "extra_info": extra})

    token_stats = None
    if tokenizer is not None:
        lengths = prompter.lengths(kept, prompts, config.seed, progress)
        token_stats = _token_stats(lengths, [s.qid in val_qids for s in all_sets], tokenizer_name)

    stats = _stats(config, prompter.settings, counts, kept, val_qids, rows, len(requests), token_stats)
    if sources is not None:
        stats["sources"] = source_counts(requests, kept, val_qids, sources)
    with staged_outputs(output_dir, overwrite) as out:  # earlier outputs: replaced only with overwrite
        for split in ("train", "val"):
            write_parquet(out.path(f"{split}.parquet"), rows[split])
            if config.sft:
                write_jsonl(out.path(f"sft_{split}.jsonl"), sft_rows[split])
        stats["outputs"] = sorted([*out.staged, "stats.md", "stats.json"])
        write_text(out.path("stats.md"), render_markdown(stats))
        write_text(out.path("stats.json"), json.dumps(stats, indent=2) + "\n")
    return stats


def source_counts(
    requests: Sequence[Request], kept: Mapping[str, Sequence[KeptSet]], val_qids: set[str], sources: Mapping[str, str]
) -> dict[str, dict[str, int]]:
    """Per source: queries in, queries with sets, and train/val queries and sets."""
    out: dict[str, dict[str, int]] = {}
    for request in requests:
        qid = request.query.qid
        row = out.setdefault(sources.get(qid, "custom"), dict.fromkeys(
            ("queries", "with_sets", "train_queries", "train_sets", "val_queries", "val_sets"), 0))
        row["queries"] += 1
        if qid in kept:
            split = "val" if qid in val_qids else "train"
            row["with_sets"] += 1
            row[f"{split}_queries"] += 1
            row[f"{split}_sets"] += len(kept[qid])
    return out


def _token_stats(measured: Mapping[str, Any], is_val: Sequence[bool], tokenizer_name: str) -> dict[str, Any]:
    lengths = measured["lengths"]
    longest = max(lengths, default=0)
    return {
        "tokenizer": tokenizer_name,
        "all": token_summary(lengths),
        "train": token_summary([n for n, v in zip(lengths, is_val) if not v]),
        "val": token_summary([n for n, v in zip(lengths, is_val) if v]),
        "check": measured["check"],
        "recommended_max_prompt_length": recommended_max_prompt_length(longest, measured["check"]["max_abs_error"]),
    }


def _stats(
    config: SynthConfig,
    settings: Mapping[str, Any],
    counts: Counter,
    kept: Mapping[str, Sequence[KeptSet]],
    val_qids: set[str],
    rows: Mapping[str, list],
    n_queries: int,
    token_stats: dict[str, Any] | None,
) -> dict[str, Any]:
    all_sets = [s for sets in kept.values() for s in sets]
    labels = Counter(label for s in all_sets for label in s.labels)
    cfg = {**asdict(config), **settings}
    return {
        "config": cfg,
        "inputs": {
            "queries": n_queries,
            "skipped_no_qrels": counts["skipped_no_qrels"],
            "skipped_too_few": counts["skipped_too_few"],
            "small_queries": counts["small_queries"],
            "small_queries_mode": config.small_queries,
            "sampled": counts["sampled"],
            "with_sets": len(kept),
        },
        "sampling": {
            "sets_drawn": counts["sets_drawn"],
            "duplicate_draws": counts["duplicate_draws"],
            "queries_short": counts["queries_short"],
        },
        "filters": {
            "enabled": config.filters.enabled(),
            "rejected": {name: counts[f"rejected_{name}"] for name in FILTERS},
            "kept": len(all_sets),
        },
        "splits": {
            split: {"queries": len({r["extra_info"]["qid"] for r in rows[split]}), "sets": len(rows[split])}
            for split in ("train", "val")
        },
        "val_qids": sorted(val_qids),
        "sets_per_query": spread([len(sets) for sets in kept.values()]),
        "relevant_per_set": spread([s.scores.n_relevant for s in all_sets]),
        "set_ndcg10": _rounded(spread([s.scores.set_ndcg for s in all_sets])),
        "pool_ndcg10": _rounded(spread([s.scores.pool_ndcg for s in all_sets])),
        "labels": {str(label): labels[label] for label in sorted(labels)},
        "prompt_tokens": token_stats,
        "versions": {"numpy": np.__version__},
        "outputs": [],
    }


def _rounded(summary: dict[str, float]) -> dict[str, float]:
    return {key: round(float(value), 4) for key, value in summary.items()}
