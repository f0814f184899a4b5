"""What ``make train-learn`` measures: held-out figures per evaluation, the warm start's gate, the paired tests,
the zero-spread share of GRPO's groups, and the curves."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rearank.io.files import atomic_path, iter_json_lines
from recipes.learn.windows import SET_SIZE

#: The gate a warm start passes before GRPO (issue #32): format, reward spread within groups, first picks balanced.
GATE = {"format_valid_min": 0.9, "zero_spread_max": 0.3, "position_max": 0.4}
#: GRPO's end must not answer one position more often than this (its held-out answers, as evaluated).
END_POSITION_MAX = 0.6


def positions(items: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Share of all answers whose (valid) pick is position 1..4."""
    n = len(items)
    return {str(k + 1): sum(int(i["first"]) == k for i in items) / n for k in range(SET_SIZE)}


def figures(stage: str, step: int, items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One evaluation: mean reward, format-valid, top-1, nDCG@10, where the picks fall (``top1_by_position``: share
    of answers picking each position) and top-1 by the best passage's position (``accuracy_by_position``)."""
    n = len(items)
    by_relevant = {str(k + 1): [i for i in items if int(i["relevant"]) == k] for k in range(SET_SIZE)}
    return {"stage": stage, "step": step, "items": n,
            "mean_reward": sum(i["score"] for i in items) / n,
            "format_valid": sum(i["valid"] for i in items) / n,
            "top1": sum(i["top1"] for i in items) / n,
            "ndcg": sum(i["ndcg"] for i in items) / n,
            "top1_by_position": positions(items),
            "accuracy_by_position": {k: (sum(i["top1"] for i in v) / len(v) if v else None)
                                     for k, v in by_relevant.items()}}


def gate(sampled: Sequence[Sequence[Mapping[str, Any]]], greedy: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The warm start's gate: on sampled groups (one list of scored answers per training prompt) the format-valid
    rate and the share of groups whose rewards are all equal; on greedy held-out answers the largest share of one
    position among the picks. ``passed`` when all three are within :data:`GATE`."""
    flat = [item for group in sampled for item in group]
    valid = sum(i["valid"] for i in flat) / len(flat)
    zero = sum(len({i["score"] for i in group}) == 1 for group in sampled) / len(sampled)
    top = max(positions(greedy).values())
    return {"format_valid": valid, "zero_spread": zero, "largest_position_share": top,
            "sampled_first_picks": positions(flat), "groups": len(sampled), "samples": len(flat),
            "passed": valid >= GATE["format_valid_min"] and zero <= GATE["zero_spread_max"]
            and top <= GATE["position_max"], "thresholds": GATE}


def validations(folder: Path) -> dict[int, list[dict]]:
    """verl's validation dumps (``trainer.validation_data_dir``: ``<step>.jsonl``), step -> items."""
    return {int(path.stem): [row for _, row in iter_json_lines(path)]
            for path in sorted(folder.glob("*.jsonl"), key=lambda p: int(p.stem))}


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
    """``after`` against ``before``, item by item (matched on the prompt): paired randomization on the reward,
    McNemar on top-1."""
    import numpy as np

    from rearank.measures.significance import mcnemar_p, randomization_p

    first = {i["input"]: i for i in before}
    if len(first) != len(before):
        raise ValueError("two held-out items share one prompt: they cannot be paired")
    keys = [i["input"] for i in after if i["input"] in first]
    last = {i["input"]: i for i in after}
    a = np.array([first[k]["score"] for k in keys], dtype=float)
    b = np.array([last[k]["score"] for k in keys], dtype=float)
    ta = np.array([bool(first[k]["top1"]) for k in keys])
    tb = np.array([bool(last[k]["top1"]) for k in keys])
    return {"baseline": baseline, "candidate": candidate, "items": len(keys),
            "reward": {"test": "two-sided paired randomization (10,000 sign flips)",
                       "p_value": randomization_p(a, b), "mean_gain": float((b - a).mean()),
                       "items_better": int((b > a).sum()), "items_worse": int((b < a).sum())},
            "top1": {"test": "two-sided exact McNemar", "p_value": mcnemar_p(ta, tb),
                     "mean_gain": float(tb.mean() - ta.mean()),
                     "only_candidate_right": int((tb & ~ta).sum()), "only_baseline_right": int((ta & ~tb).sum())}}


def verdict(task: str, evaluations: Sequence[Mapping[str, Any]], test: Mapping[str, Any]) -> list[str]:
    """Plain lines: top-1 and reward base -> SFT -> GRPO end, the tests, the end's largest position share."""
    stage = {e["stage"]: e for e in evaluations if e["stage"] in ("base", "sft")}
    end = [e for e in evaluations if e["stage"] == "grpo"][-1]
    top = max(end["top1_by_position"].values())
    won = test["reward"]["mean_gain"] > 0 and test["reward"]["p_value"] < 0.05
    lines = [(f"{task}: top-1 base {stage['base']['top1']:.3f} -> SFT {stage['sft']['top1']:.3f} -> GRPO step "
              f"{end['step']} {end['top1']:.3f}; reward {stage['base']['mean_reward']:+.3f} -> "
              f"{stage['sft']['mean_reward']:+.3f} -> {end['mean_reward']:+.3f}"),
             (f"{task}: GRPO step {end['step']} vs its start over {test['items']} held-out items: reward "
              f"{test['reward']['mean_gain']:+.4f} (p = {test['reward']['p_value']:.4g}), top-1 "
              f"{test['top1']['mean_gain']:+.4f} (McNemar p = {test['top1']['p_value']:.4g}): "
              f"{'GRPO above its start at p < 0.05' if won else 'NOT significantly above its start'}"),
             (f"{task}: largest share of one position among GRPO's answers {top:.2f} "
              f"({'within' if top <= END_POSITION_MAX else 'ABOVE'} {END_POSITION_MAX})")]
    return lines


def plot(tasks: Mapping[str, Mapping[str, Any]], path: Path) -> None:
    """Per task: held-out top-1 and reward by GRPO step (SFT at step 0 inside verl), and the training reward."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(tasks), figsize=(6 * len(tasks), 4), squeeze=False)
    for ax, (task, result) in zip(axes[0], tasks.items()):
        grpo = [e for e in result["evaluations"] if e["stage"] == "grpo"]
        steps = [e["step"] for e in grpo]
        temperature = result.get("settings", {}).get("eval_temperature", 0)
        how = f"sampled at {temperature:g}" if temperature else "greedy"
        ax.plot(steps, [e["top1"] for e in grpo], marker="o", label=f"held-out top-1 ({how})")
        ax.plot(steps, [e["mean_reward"] for e in grpo], marker="o", label=f"held-out reward ({how})")
        train = result.get("training", [])
        ax.plot([r["step"] for r in train], [r["score"] for r in train], alpha=0.6, label="training reward (sampled)")
        ax.plot([r["step"] for r in train], [r.get("zero_spread") for r in train], linestyle="--", alpha=0.8,
                label="share of groups without reward spread")
        base = next((e for e in result["evaluations"] if e["stage"] == "base"), None)
        if base:
            ax.axhline(base["top1"], color="grey", linestyle=":", label="base model top-1")
        ax.axhline(1 / SET_SIZE, color="black", linestyle="--", linewidth=0.8, label="chance top-1")
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
