"""The synthesis report: numeric summaries, the recommended verl ``max_prompt_length``, and ``stats.md``."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: verl's ``data.max_prompt_length`` is recommended as a multiple of this.
PROMPT_LENGTH_STEP = 256


def spread(values: Sequence[float]) -> dict[str, float]:
    """min / mean / max of ``values`` (zeros when empty)."""
    if not values:
        return {"min": 0, "mean": 0.0, "max": 0}
    return {"min": min(values), "mean": round(float(np.mean(values)), 4), "max": max(values)}


def token_summary(lengths: Sequence[int]) -> dict[str, float]:
    """mean, p50, p95 and max of prompt lengths in tokens."""
    if not lengths:
        return {"count": 0, "mean": 0.0, "p50": 0.0, "p95": 0.0, "max": 0}
    arr = np.asarray(lengths)
    return {
        "count": int(arr.size),
        "mean": round(float(arr.mean()), 1),
        "p50": float(np.percentile(arr, 50)),
        "p95": float(np.percentile(arr, 95)),
        "max": int(arr.max()),
    }


def recommended_max_prompt_length(longest: int, error_margin: int = 0) -> int:
    """The smallest multiple of :data:`PROMPT_LENGTH_STEP` holding the longest prompt (plus the counting error)."""
    return max(PROMPT_LENGTH_STEP, math.ceil((longest + error_margin) / PROMPT_LENGTH_STEP) * PROMPT_LENGTH_STEP)


def render_markdown(stats: Mapping[str, Any]) -> str:
    """A human-readable ``stats.md`` from the ``stats.json`` dictionary."""
    cfg, inputs, sampling, filters = stats["config"], stats["inputs"], stats["sampling"], stats["filters"]
    lines = [
        f"# Synthesis report: {cfg['data_source'] or ', '.join(stats.get('sources', {}))}",
        "",
        (f"{cfg['samples_per_query']} sets of {cfg['set_size']} passages per query from the top {cfg['top_k']}, "
        f"order `{cfg['order']}`, seed {cfg['seed']}, "
        + (f"template `{cfg['template']}`, " if cfg["template"] else f"the `{cfg['method']}` method's own prompts, ")
        + f"validation fraction {cfg['val_fraction']}."),
        "",
        "## Queries",
        "",
        "| | count |",
        "|---|---:|",
        f"| in the input | {inputs['queries']} |",
        f"| skipped: no qrels | {inputs['skipped_no_qrels']} |",
        f"| fewer candidates than the set size ({inputs['small_queries_mode']}) | {inputs['small_queries']} |",
        f"| skipped: fewer than 2 candidates | {inputs['skipped_too_few']} |",
        f"| sampled | {inputs['sampled']} |",
        f"| with at least one kept set | {inputs['with_sets']} |",
        "",
        "## Sets",
        "",
        "| | count |",
        "|---|---:|",
        f"| distinct sets drawn | {sampling['sets_drawn']} |",
        f"| duplicate draws rejected | {sampling['duplicate_draws']} |",
        f"| queries with fewer distinct sets than asked | {sampling['queries_short']} |",
    ]
    for name, count in filters["rejected"].items():
        state = "on" if name in filters["enabled"] else "off"
        lines.append(f"| removed by filter `{name}` ({state}) | {count} |")
    splits = stats["splits"]
    lines += [
        f"| **kept** | **{filters['kept']}** |",
        f"| train: sets / queries | {splits['train']['sets']} / {splits['train']['queries']} |",
        f"| val: sets / queries | {splits['val']['sets']} / {splits['val']['queries']} |",
        "",
        "Filters are checked in the order listed; a set is counted under the first one that removes it.",
        "",
    ]
    if stats.get("sources"):
        lines += [
            "## Sources", "",
            "| source | queries | with sets | train queries / sets | val queries / sets |",
            "|---|---:|---:|---:|---:|",
        ]
        lines += [f"| {name} | {c['queries']} | {c['with_sets']} | {c['train_queries']} / {c['train_sets']} | "
                  f"{c['val_queries']} / {c['val_sets']} |" for name, c in stats["sources"].items()]
        lines.append("")
    per_query = stats["sets_per_query"]
    lines += [
        "## Kept sets",
        "",
        "| | min | mean | max |",
        "|---|---:|---:|---:|",
        f"| sets per query | {per_query['min']} | {per_query['mean']} | {per_query['max']} |",
        f"| relevant passages per set | {_row(stats['relevant_per_set'])} |",
        f"| set nDCG@10 (presented order vs. the set's best) | {_row(stats['set_ndcg10'])} |",
        f"| pool nDCG@10 (the set's best order vs. all judgments) | {_row(stats['pool_ndcg10'])} |",
        "",
        "Label distribution over the passages of kept sets:",
        "",
        "| label | passages | share |",
        "|---:|---:|---:|",
    ]
    total = sum(stats["labels"].values()) or 1
    lines += [f"| {label} | {n} | {n / total:.1%} |" for label, n in stats["labels"].items()]
    tokens = stats.get("prompt_tokens")
    lines += ["", "## Prompt length", ""]
    if not tokens:
        lines.append("Not counted (`--tokenizer none`).")
    else:
        check = tokens["check"]
        lines += [
            f"Tokenizer `{tokens['tokenizer']}`, counted as verl does (chat template with the generation prompt).",
            "",
            "| split | sets | mean | p50 | p95 | max |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for split in ("all", "train", "val"):
            s = tokens[split]
            lines.append(f"| {split} | {s['count']} | {s['mean']} | {s['p50']} | {s['p95']} | {s['max']} |")
        lines += [
            "",
            f"Counting checked exactly on {check['sets']} sets: largest error {check['max_abs_error']} tokens.",
            "",
            (f"**Recommended verl `data.max_prompt_length`: {tokens['recommended_max_prompt_length']}** "
            "(no prompt is filtered or truncated)."),
        ]
    lines += ["", "## Files", ""] + [f"- `{name}`" for name in stats["outputs"]]
    return "\n".join(lines) + "\n"


def _row(summary: Mapping[str, float]) -> str:
    return " | ".join(str(summary[key]) for key in ("min", "mean", "max"))
