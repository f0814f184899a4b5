"""What ``make train-learn`` measures: the plan fixed before a run, held-out figures per evaluation, the warm
start's gate, the paired tests, the lexical and constant baselines, the per-item outcomes, the zero-spread share of
GRPO's groups, and the curves."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rearank.io.files import atomic_path, iter_json_lines
from recipes.learn.lexical import BM25, expected_top1, overlap

ALPHA = 0.05


def gate_thresholds(size: int) -> dict[str, float]:
    """The gate a warm start passes before GRPO (issue #32) on windows of ``size`` passages: format, reward spread
    within groups, first picks balanced. ``position_max`` lies a fifth of the way from an even spread (1/N) to one
    position taking every answer, (N + 4) / 5N: 0.4 at 4 passages, 0.6 at 2. ``zero_spread_max`` is 0.3 at any N:
    a group of R answers, each right with probability q, has no reward spread with probability q^R + (1 - q)^R, which
    depends on q, not on N (0.3 at R = 4 admits 0.26 <= q <= 0.74); N enters only through chance, q = 1/N
    (:func:`chance_zero_spread`: 0.32 at N = 4, R = 4, so there the bound also asks a little more than chance;
    0.125 at N = 2, the fewest any reader leaves, so there it stops near-certain readers and habits only)."""
    return {"format_valid_min": 0.9, "zero_spread_max": 0.3, "position_max": (size + 4) / (5 * size)}


def chance_zero_spread(size: int, rollouts: int) -> float:
    """The share of groups of ``rollouts`` answers without reward spread for a reader that picks one of ``size``
    passages at random: all wrong or all right, (1 - 1/N)^R + (1/N)^R."""
    return (1 - 1 / size) ** rollouts + (1 / size) ** rollouts


def end_position_max(size: int) -> float:
    """The largest share of one position GRPO's end may answer (issue #45): a third of the way from an even spread
    (1/N) to one position taking every answer, (N + 2) / 3N: 0.5 at 4 passages, 2/3 at 2 (where a limit of 2/N
    would be 1, no limit at all)."""
    return (size + 2) / (3 * size)


def answer_share(answers: Sequence[int], size: int) -> dict[str, float]:
    """Share of all answers that name position 1..size (a habit shows as one large share; not an accuracy)."""
    return {str(k): sum(a == k for a in answers) / len(answers) for k in range(1, size + 1)}


def figures(stage: str, step: int, outcomes: Sequence[Mapping[str, Any]], *, size: int) -> dict[str, Any]:
    """One evaluation on windows of ``size`` passages: top-1, the share of answers per position
    (``answer_share_by_position``), top-1 among the items whose best passage is at each position
    (``accuracy_by_position``), and how often greedy decoding would answer the same id (``greedy_agrees``)."""
    by_gold = {str(k): [o for o in outcomes if o["gold"] == k] for k in range(1, size + 1)}
    return {"stage": stage, "step": step, "items": len(outcomes),
            "top1": sum(o["right"] for o in outcomes) / len(outcomes),
            "answer_share_by_position": answer_share([o["answer"] for o in outcomes], size),
            "accuracy_by_position": {k: (sum(o["right"] for o in v) / len(v) if v else None)
                                     for k, v in by_gold.items()},
            "greedy_agrees": sum(o["greedy_agrees"] for o in outcomes) / len(outcomes)}


def baselines(rows: Sequence[Mapping[str, Any]], *, size: int) -> dict[str, Any]:
    """On the evaluation's windows of ``size`` passages: top-1 of always answering one position, of the highest
    query-term overlap and of the highest BM25 score on the shown words (document frequencies over every shown
    passage; ties split)."""
    info = [r["extra_info"] for r in rows]
    bm25 = BM25(t for i in info for t in i["shown"])
    constant = {str(k): sum(i["target"] == k for i in info) / len(info) for k in range(1, size + 1)}
    return {"constant_position": constant, "best_constant": max(constant.values()),
            "query_term_overlap": sum(expected_top1(overlap(i["query"], i["shown"]), i["target"] - 1)
                                      for i in info) / len(info),
            "bm25_on_shown_words": sum(expected_top1(bm25.scores(i["query"], i["shown"]), i["target"] - 1)
                                       for i in info) / len(info),
            "items": len(info), "note": "ties broken at random (expected top-1); terms: rearank recipes/learn/lexical.py"}


def plan(task: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    """What a run will do, fixed before it trains: its GRPO steps, the steps whose checkpoints are evaluated
    (0 = the warm start, every ``eval_every`` steps, and the last) and every setting."""
    steps, every = int(settings["grpo_steps"]), int(settings["eval_every"])
    return {"task": task, "grpo_steps": steps,
            "evaluation_steps": sorted({0, *range(every, steps + 1, every), steps}),
            "settings": dict(settings)}


def missing(planned: Mapping[str, Any], evaluated: Iterable[int]) -> list[int]:
    """The planned evaluation steps a run has no evaluation of (empty: the run reached its plan)."""
    done = set(evaluated)
    return [step for step in planned["evaluation_steps"] if step not in done]
def gate(sampled: Sequence[Sequence[Mapping[str, Any]]], greedy: Sequence[Mapping[str, Any]], *,
         size: int) -> dict[str, Any]:
    """The warm start's gate on windows of ``size`` passages: on sampled groups (one list of answers scored by the
    reward per training prompt) the format-valid rate and the share of groups whose rewards are all equal (beside
    it, that share for a reader answering at random, :func:`chance_zero_spread`); on its deterministic held-out
    outcomes the largest share of one position among the answers. ``passed`` when all three are within
    :func:`gate_thresholds`."""
    limits = gate_thresholds(size)
    flat = [item for group in sampled for item in group]
    valid = sum(i["valid"] for i in flat) / len(flat)
    zero = sum(len({i["score"] for i in group}) == 1 for group in sampled) / len(sampled)
    top = max(answer_share([o["answer"] for o in greedy], size).values())
    return {"format_valid": valid, "zero_spread": zero,
            "zero_spread_at_chance": chance_zero_spread(size, len(sampled[0])), "largest_position_share": top,
            "sampled_answer_share": answer_share([int(i["first"]) + 1 for i in flat if i["valid"]] or [0], size),
            "groups": len(sampled), "samples": len(flat),
            "passed": valid >= limits["format_valid_min"] and zero <= limits["zero_spread_max"]
            and top <= limits["position_max"], "thresholds": limits}


def zero_spread(folder: Path) -> dict[int, float]:
    """Per GRPO step, the share of groups (verl's rollout dumps, uid ``<prompt>_<rollout>_<output>``) whose
    rewards are all equal: such a group has no advantage, so it teaches nothing."""
    shares = {}
    for path in folder.glob("*.jsonl"):
        groups: dict[str, set[float]] = {}
        for _, row in iter_json_lines(path):
            groups.setdefault(str(row["uid"]).rsplit("_", 2)[0], set()).add(round(float(row["score"]), 6))
        shares[int(path.stem)] = sum(len(s) == 1 for s in groups.values()) / len(groups)
    return dict(sorted(shares.items()))


def paired(before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]], baseline: str,
           candidate: str) -> dict[str, Any]:
    """``after`` against ``before`` on top-1, outcomes matched by item: McNemar's exact test (items) and a
    randomization test flipping whole queries' paired differences (queries)."""
    import numpy as np

    from rearank.measures.significance import mcnemar_p, query_randomization_p

    first = {o["item"]: o for o in before}
    if len(first) != len(before):
        raise ValueError("two outcomes share one item: they cannot be paired")
    keys = [o["item"] for o in after if o["item"] in first]
    last = {o["item"]: o for o in after}
    a = np.array([bool(first[k]["right"]) for k in keys])
    b = np.array([bool(last[k]["right"]) for k in keys])
    queries = [first[k]["qid"] for k in keys]
    return {"baseline": baseline, "candidate": candidate, "items": len(keys), "queries": len(set(queries)),
            "top1_baseline": float(a.mean()), "top1_candidate": float(b.mean()), "gain": float(b.mean() - a.mean()),
            "only_candidate_right": int((b & ~a).sum()), "only_baseline_right": int((a & ~b).sum()),
            "per_item": {"test": "two-sided exact McNemar (binomial on the discordant items)",
                         "p_value": mcnemar_p(a, b)},
            "per_query": {"test": "two-sided randomization, whole queries' paired differences flipped "
                                  "(exact up to 16 queries, else 100,000 flips)",
                          "p_value": query_randomization_p(a.astype(float), b.astype(float), queries)}}


def verdict(task: str, planned: Mapping[str, Any], evaluations: Sequence[Mapping[str, Any]],
            test: Mapping[str, Any], lexical: Mapping[str, Any], *, size: int) -> list[str]:
    """Plain lines, each opening with ``task`` (the variant's name: "relevance, 2 passages" is never read as the
    4-passage run): whether the run reached its plan; top-1 base -> warm start -> GRPO end against the baselines;
    both tests; the end's largest position share (at most :func:`end_position_max` of ``size``); and the issue's
    target, met or not."""
    gone = missing(planned, [e["step"] for e in evaluations if e["stage"] in ("warm start", "grpo")])
    stage = {e["stage"]: e for e in evaluations if e["stage"] in ("base", "warm start")}
    end = [e for e in evaluations if e["stage"] == "grpo"][-1]
    top = max(end["answer_share_by_position"].values())
    p_item, p_query = test["per_item"]["p_value"], test["per_query"]["p_value"]
    limit = end_position_max(size)
    met = (not gone and test["gain"] > 0 and p_item < ALPHA and p_query < ALPHA
           and end["top1"] > lexical["best_constant"] and top <= limit)
    lines = []
    if gone:
        lines.append(f"{task}: STOPPED BEFORE ITS PLAN: no evaluation at step(s) {gone} of the planned "
                     f"{planned['evaluation_steps']}; the figures below are not the planned run's")
    lines += [(f"{task}: top-1 base {stage['base']['top1']:.3f} -> warm start {stage['warm start']['top1']:.3f} -> "
               f"GRPO step {end['step']} {end['top1']:.3f} over {end['items']} held-out windows (best constant "
               f"position {lexical['best_constant']:.3f}, query-term overlap {lexical['query_term_overlap']:.3f}, "
               f"BM25 on the shown words {lexical['bm25_on_shown_words']:.3f})"),
              (f"{task}: GRPO step {end['step']} vs the warm start: top-1 {test['gain']:+.4f} "
               f"({test['only_candidate_right']} right only after, {test['only_baseline_right']} only before); "
               f"McNemar p = {p_item:.4g}, query-flip p = {p_query:.4g} over {test['queries']} queries"),
              (f"{task}: largest share of one position among GRPO's answers {top:.2f} "
               f"({'within' if top <= limit else 'ABOVE'} {limit:.3g})"),
              (f"{task}: target {'MET' if met else 'NOT met'} (above the warm start at p < {ALPHA} by both tests, "
               f"above the best constant position, no position over {limit:.3g}, the plan reached)")]
    return lines


def write_outcomes(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """Every evaluation's per-item outcomes (task, stage, step, item, qid, gold, answer), one JSON object a line,
    gzip-compressed, written then renamed: enough to recompute every figure and test."""
    with atomic_path(path) as tmp, gzip.open(tmp, "wt", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, sort_keys=True) + "\n")


def plot(tasks: Mapping[str, Mapping[str, Any]], path: Path) -> None:
    """Per task: held-out top-1 by GRPO step (the warm start at 0), the baselines, and the training reward."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(tasks), figsize=(6 * len(tasks), 4), squeeze=False)
    for ax, (task, result) in zip(axes[0], tasks.items()):
        runs = [e for e in result.get("evaluations", []) if e["stage"] in ("warm start", "grpo")]
        ax.plot([e["step"] for e in runs], [e["top1"] for e in runs], marker="o", label="held-out top-1")
        train = result.get("training", [])
        ax.plot([r["step"] for r in train], [r["score"] for r in train], alpha=0.6, label="training reward (sampled)")
        ax.plot([r["step"] for r in train], [r.get("zero_spread") for r in train], linestyle="--", alpha=0.8,
                label="share of groups without reward spread")
        lexical = result.get("baselines", {})
        for key, style in (("best_constant", ":"), ("query_term_overlap", "-."), ("bm25_on_shown_words", "--")):
            if key in lexical:
                ax.axhline(lexical[key], linestyle=style, color="grey", linewidth=0.9, label=key.replace("_", " "))
        ax.set(title=f"{task}: verl GRPO on CPU, SmolLM2-135M", xlabel="GRPO step", ylim=(-1.05, 1.05))
        ax.legend(fontsize=7)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)


def training_rows(rows: Iterable[Mapping[str, Any]]) -> list[dict]:
    """verl's per-step metrics, the few the report keeps."""
    keys = {"critic/score/mean": "score", "actor/grad_norm": "grad_norm", "actor/pg_loss": "pg_loss",
            "response_length/mean": "response_length", "timing_s/step": "step_s", "timing_s/gen": "gen_s",
            "timing_s/update_actor": "update_s"}
    return [{"step": int(r["training/global_step"]), **{short: r[k] for k, short in keys.items() if k in r}}
            for r in rows]
