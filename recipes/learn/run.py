"""The stages of ``make train-learn``: data, the base model's and the warm start's answers, the gate, verl GRPO,
the report. ``python -m recipes.learn --help`` lists the settings."""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rearank.errors import RearankError
from rearank.io.files import atomic_folder, atomic_path, atomic_write
from recipes.checks.cpu import OutOfMemory, merge_metrics, runtime_env, train
from recipes.checks.data import shared
from recipes.checks.sft import train_on_answers
from recipes.checks.table import STAGES
from recipes.learn import report
from recipes.learn.evaluate import first_ids, outcomes
from recipes.learn.reward import compute_score
from recipes.learn.windows import DEFAULT_SET_SIZE, TASKS, balanced_order, heldout, lexical_windows, windows

TRAIN_SET, HELD_OUT = "dl21", "dl19"
#: The verl recipe the GRPO stage runs (its algorithm, optimiser and loss; sizes and reward as overridden here).
STAGE = STAGES["rearank"]
RESPONSE_TOKENS = 8
DEFAULT_OUTPUT = Path("docs/figures/train_learn.json")
#: The settings a saved warm start (``<out>/<variant>/warm_start.json``, :func:`file_name`) must match to be reused.
WARM_START_SETTINGS = ("windows_per_query", "heldout", "sft_steps", "sft_batch", "sft_lr", "sft_right",
                       "sft_check_every", "sft_until", "gate_prompts", "rollouts", "threads", "seed")
#: Command-line settings that are not part of a run's plan (where it works and writes, what it does this time).
NOT_PLANNED = ("task", "out", "output", "report_only")
#: Why this reward and not the recipe's (recorded in the plan).
REWARD = ("recipes.learn.reward.compute_score (variant 'one-id'): 1 for the one id of the best passage, 0 for one "
          "id of another, -1 for anything else; the recipe's normalized nDCG@10 + 0.1 format repairs malformed "
          "answers and pays little for format, which let an earlier run drift into unclosed id chains, and its "
          "rank term is lopsided by the best passage's position (docs/training.md)")


def variant(task: str, size: int) -> str:
    """The name of a task's figures entry, curve and verdict: the task at :data:`DEFAULT_SET_SIZE` passages, else
    "<task>, N passages", so that a run on N passages is never read as the 4-passage one."""
    return task if size == DEFAULT_SET_SIZE else f"{task}, {size} passages"


def file_name(name: str) -> str:
    """A variant's name as its working folder and outcomes file spell it ("relevance, 2 passages" ->
    "relevance_2passages")."""
    return name.replace(", ", "_").replace(" ", "")


def sft_until(size: int) -> float:
    """The default ``--sft-until`` on ``size`` passages: a third of the way from chance to 1 (0.5 at 4, 0.667 at 2)."""
    return round(1 / size + (1 - 1 / size) / 3, 3)


def settings_error(args: argparse.Namespace) -> str | None:
    """What is wrong with the settings of ``args``, or None: at least 2 passages a window, the held-out windows and
    each step's prompts a multiple of it, so that every position holds the best passage equally often, and the warm
    start's stop rule (``--sft-until``) above chance on it."""
    size = args.set_size
    if size < 2:
        return f"--set-size {size}: at least 2 passages"
    for option in ("heldout", "prompts_per_step"):
        if getattr(args, option) % size:
            return (f"--{option.replace('_', '-')} {getattr(args, option)}: not a multiple of --set-size {size} "
                    "(each position holds the best passage equally often)")
    if args.sft_until <= 1 / size:
        return (f"--sft-until {args.sft_until}: at or below chance on {size} passages ({1 / size:g}); the warm start "
                "would stop before it reads (give a share between chance and 1, e.g. 0.7 at 2 passages)")
    return None


def encode(tokenizer: Any, messages: Sequence[dict]) -> list[int]:
    return tokenizer.apply_chat_template([dict(m) for m in messages], add_generation_prompt=True, tokenize=True,
                                         return_dict=True)["input_ids"]


def build_data(task: str, folder: Path, args: argparse.Namespace) -> dict[str, list[dict]]:
    """The rows of each stage, from dl21 (``sft``: the warm start's; ``probe``: its checks'; ``grpo``: GRPO's
    prompts, each batch balanced by the best passage's position) and dl19 (``held``: the held-out windows); the GRPO
    and held-out rows are written as verl parquet (``train.parquet``, ``val.parquet``) in ``folder``."""
    import pandas as pd

    from rearank.data.packs import load_qrels, load_requests

    rng = random.Random(args.seed)
    size = args.set_size
    sft_n, grpo_n = args.sft_steps * args.sft_batch, args.grpo_steps * args.prompts_per_step
    train_requests, held_requests = load_requests(dataset=TRAIN_SET), load_requests(dataset=HELD_OUT)
    gold = list(windows(task, TRAIN_SET, train_requests, load_qrels(TRAIN_SET), args.windows_per_query, args.seed,
                        size=size))
    rng.shuffle(gold)
    if task == "relevance":  # the warm start learns lexical labels; GRPO the judgments
        warm = list(lexical_windows(TRAIN_SET, train_requests, args.windows_per_query, args.seed, size=size))
        rng.shuffle(warm)
        held = heldout(HELD_OUT, held_requests, load_qrels(HELD_OUT), args.heldout, args.seed + 1, size=size)
    else:
        warm, gold = gold, gold[sft_n + 4 * args.gate_prompts:]
        held = list(windows(task, HELD_OUT, held_requests, load_qrels(HELD_OUT), args.windows_per_query,
                            args.seed + 1, size=size))
        if len(held) < args.heldout:
            raise RearankError(f"{task}: {len(held)} {HELD_OUT} windows, --heldout {args.heldout} asked")
        held = rng.sample(held, args.heldout)
    grpo = balanced_order(gold, args.seed, size=size)
    if len(warm) < sft_n + args.gate_prompts or len(grpo) < grpo_n:
        raise RearankError(f"{task}: {len(warm)} warm-start and {len(grpo)} GRPO {TRAIN_SET} windows, "
                           f"{sft_n} + {args.gate_prompts} and {grpo_n} needed; raise --windows-per-query")
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in (("train.parquet", grpo[:grpo_n]), ("val.parquet", held)):
        with atomic_path(folder / name) as tmp:
            pd.DataFrame(rows).to_parquet(tmp)
    return {"sft": warm[:sft_n], "probe": balanced(warm[sft_n:], args.gate_prompts, size=size),
            "grpo": grpo[:grpo_n], "held": held}


def sft_examples(rows: Sequence[dict], tokenizer: Any, right: float, seed: int, *,
                 size: int) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, answer ids) of windows of ``size`` passages: the target is the best passage's id with
    probability ``right``, else one of the other ids at random, so the targets' positions stay balanced and the
    policy keeps variance."""
    rng = random.Random(seed)
    examples = []
    for row in rows:
        target = row["extra_info"]["target"]
        if rng.random() >= right:
            target = rng.choice([k for k in range(1, size + 1) if k != target])
        answer = tokenizer.encode(f"[{target}]", add_special_tokens=False) + [tokenizer.eos_token_id]
        examples.append((encode(tokenizer, row["prompt"]), answer))
    return examples


def sampled(model: Any, tokenizer: Any, rows: Sequence[dict], samples: int, batch: int = 32) -> list[list[dict]]:
    """Per row, ``samples`` answers sampled at temperature 1 (as GRPO's rollouts), each scored by the reward."""
    import torch

    out: list[list[dict]] = []
    with torch.no_grad():
        for start in range(0, len(rows), batch):
            chunk = rows[start:start + batch]
            enc = tokenizer.apply_chat_template([[dict(m) for m in r["prompt"]] for r in chunk],
                                                add_generation_prompt=True, return_tensors="pt", padding=True,
                                                return_dict=True)
            generated = model.generate(**enc, max_new_tokens=RESPONSE_TOKENS, pad_token_id=tokenizer.pad_token_id,
                                       do_sample=True, temperature=1.0, top_p=1.0, top_k=0,
                                       num_return_sequences=samples)
            texts = tokenizer.batch_decode(generated[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
            out += [[compute_score(r["data_source"], t, r["reward_model"]["ground_truth"])
                     for t in texts[i * samples:(i + 1) * samples]] for i, r in enumerate(chunk)]
    return out


def balanced(rows: Sequence[dict], n: int, *, size: int) -> list[dict]:
    """The first rows (windows of ``size`` passages) with at most ``n // size`` per best position: on them a reader
    that is always right spreads its picks evenly, so the gate's largest position share measures a habit, not the
    draw of the rows."""
    taken = dict.fromkeys(range(1, size + 1), 0)
    out = []
    for row in rows:
        target = row["extra_info"]["target"]
        if taken[target] < n // size:
            taken[target] += 1
            out.append(row)
    return out


def grpo_overrides(folder: Path, args: argparse.Namespace) -> list[str]:
    """The GRPO stage's changes to the recipe's CPU run: sizes, the one-id reward, KL, the prompts in their
    balanced order, and a Hugging Face checkpoint at every planned evaluation step (no validation inside verl)."""
    return [
        f"data.train_batch_size={args.prompts_per_step}", f"data.max_response_length={RESPONSE_TOKENS}",
        "data.shuffle=false",  # build_data ordered the prompts so that each batch is balanced by position
        f"actor_rollout_ref.rollout.n={args.rollouts}",
        # one update a step: the rollout's log-probs are the old policy's (verl's bypass mode skips the recompute)
        f"actor_rollout_ref.actor.ppo_mini_batch_size={args.prompts_per_step}",
        "algorithm.rollout_correction.bypass_mode=true",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=4096", f"actor_rollout_ref.actor.optim.lr={args.lr}",
        f"actor_rollout_ref.actor.use_kl_loss={str(args.kl > 0).lower()}",
        f"actor_rollout_ref.actor.kl_loss_coef={args.kl}", "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
        "reward.custom_reward_function.path=pkg://recipes.learn.reward",
        "reward.custom_reward_function.name=compute_score", "reward.custom_reward_function.reward_kwargs={}",
        f"trainer.save_freq={args.eval_every}", "actor_rollout_ref.actor.checkpoint.save_contents=['hf_model']",
        "trainer.test_freq=-1", "trainer.val_before_train=false",
        f"trainer.rollout_data_dir={folder / 'rollouts'}",
        f"data.seed={args.seed}", *runtime_env({"OMP_NUM_THREADS": str(args.threads)}),
    ]


def checkpoints(folder: Path) -> dict[int, Path]:
    """GRPO step -> the Hugging Face model verl saved at it (``<folder>/checkpoints/global_step_N/actor/huggingface``)."""
    found = {}
    for path in (folder / "checkpoints").glob("global_step_*/actor/huggingface"):
        if (path / "config.json").is_file():
            found[int(path.parent.parent.name.rsplit("_", 1)[1])] = path
    return dict(sorted(found.items()))


def evaluate_checkpoints(found: dict[int, Path], held: list[dict], threads: int, size: int) -> dict[int, list[dict]]:
    """Each checkpoint's held-out outcomes on windows of ``size`` passages
    (:func:`recipes.learn.evaluate.first_ids`)."""
    import torch

    from rearank.backends.models import embedded_model_path
    from recipes.checks.models import load_model, load_tokenizer

    torch.set_num_threads(threads)
    tokenizer = load_tokenizer(embedded_model_path(), padding_side="left")
    out = {}
    for step, path in found.items():
        out[step] = outcomes(held, first_ids(load_model(path), tokenizer, held, size=size))
        print(f"GRPO step {step}: held-out top-1 {report.figures('grpo', step, out[step], size=size)['top1']:.3f}",
              flush=True)
    return out


def warm_start(task: str, data: dict[str, list[dict]], target: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The base model's held-out outcomes, the warm start (saved to ``target``), its held-out outcomes (GRPO's
    step 0) and its gate, on windows of ``--set-size`` passages; ``task``: the variant's name, for the log."""
    import torch

    from rearank.backends.models import embedded_model_path
    from recipes.checks.models import load_model, load_tokenizer

    times: dict[str, float] = {}
    mark = time.perf_counter()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    base = embedded_model_path()
    tokenizer = load_tokenizer(base, padding_side="left")
    model = load_model(base)
    held, probe, size = data["held"], data["probe"], args.set_size
    position_max = report.gate_thresholds(size)["position_max"]
    base_outcomes = outcomes(held, first_ids(model, tokenizer, held, size=size))
    times["base_eval_s"] = round(time.perf_counter() - mark)
    checks: list[dict[str, Any]] = []

    def check(step: int) -> bool:
        """Stop the warm start at partial skill: its answers agree with the probe's labels (lexical ones for
        relevance) on at least ``--sft-until`` of it, and no position takes more than the gate's share."""
        figures = report.figures("probe", step, outcomes(probe, first_ids(model, tokenizer, probe, size=size)),
                                 size=size)
        checks.append({"step": step, "agreement": figures["top1"],
                       "largest_position_share": max(figures["answer_share_by_position"].values())})
        print(f"{task}: SFT step {step}: {checks[-1]}", flush=True)
        model.train()
        return (checks[-1]["agreement"] >= args.sft_until
                and checks[-1]["largest_position_share"] <= position_max)

    mark = time.perf_counter()
    losses = train_on_answers(model, sft_examples(data["sft"], tokenizer, args.sft_right, args.seed, size=size),
                              args.sft_steps, args.sft_lr, args.sft_batch, tokenizer.pad_token_id, args.seed,
                              check=check, every=args.sft_check_every)
    times["sft_s"] = round(time.perf_counter() - mark)
    mark = time.perf_counter()
    warm_outcomes = outcomes(held, first_ids(model, tokenizer, held, size=size))
    gate = report.gate(sampled(model, tokenizer, balanced(data["grpo"], args.gate_prompts, size=size), args.rollouts),
                       warm_outcomes, size=size)
    times["gate_s"] = round(time.perf_counter() - mark)
    print(f"{task}: gate {gate}", flush=True)
    with atomic_folder(target, replace=True) as tmp:
        model.save_pretrained(tmp)
        load_tokenizer(base).save_pretrained(tmp)
        model.generation_config.save_pretrained(tmp)
    return {"outcomes": {"base": base_outcomes, "warm start": warm_outcomes}, "sft_steps_run": len(losses),
            "gate": gate, "sft_loss": losses, "sft_checks": checks, "times": times}


def save_warm_start(task: str, data: dict[str, list[dict]], folder: Path, args: argparse.Namespace,
                    settings: dict[str, Any]) -> None:
    """The warm start (``sft-model``) and what it measured (``warm_start.json``, with the ``settings`` it was made
    with) in ``folder``."""
    result = {**warm_start(task, data, folder / "sft-model", args), "settings": settings}
    with atomic_write(folder / "warm_start.json") as handle:
        handle.write(json.dumps(result, indent=1) + "\n")


def run_task(task: str, out: Path, args: argparse.Namespace, planned: dict[str, Any]) -> tuple[dict, list[dict]]:
    """One task as ``planned``, on windows of ``args.set_size`` passages (working folder ``out/<variant>``): its
    figures entry and every evaluation's per-item outcomes."""
    name, size = variant(task, args.set_size), args.set_size
    folder = out / file_name(name)
    sft_model, saved = folder / "sft-model", folder / "warm_start.json"
    made_with = {key: getattr(args, key) for key in WARM_START_SETTINGS}
    result = None
    if saved.is_file() and (sft_model / "config.json").is_file():  # an interrupted run resumes after its warm start
        result = json.loads(saved.read_text(encoding="utf-8"))
        if (before := result.get("settings") or {}) != made_with:  # checked before the folder's data is rewritten
            differ = ", ".join(f"{k} {before.get(k)} (asked {v})" for k, v in made_with.items() if before.get(k) != v)
            raise RearankError(f"{saved}: this warm start was made with other settings: {differ}; move {folder} "
                               "aside (it holds an earlier attempt) or give another --out to make a new one")
    elif args.report_only:
        raise RearankError(f"--report-only: no warm start in {saved}")
    data = build_data(task, folder / "data", args)
    print(f"{name}: {len(data['sft'])} warm-start rows, {len(data['grpo'])} GRPO prompts ({TRAIN_SET}), "
          f"{len(data['held'])} held-out ({HELD_OUT})", flush=True)
    if result is not None:
        print(f"{name}: warm start, its evaluations and gate read back from {saved}", flush=True)
    else:  # in a child process, so that the memory it holds is returned before verl starts
        child = multiprocessing.get_context("spawn").Process(
            target=save_warm_start, args=(name, data, folder, args, made_with), name=f"{file_name(name)}-warm-start")
        child.start()
        child.join()
        if child.exitcode != 0 or not saved.is_file():
            raise RearankError(f"{name}: the warm start's process ended with exit code {child.exitcode} and no "
                               f"{saved} (its error is printed above)")
        result = json.loads(saved.read_text(encoding="utf-8"))
    runs = {("base", 0): result["outcomes"]["base"], ("warm start", 0): result["outcomes"]["warm start"]}
    entry = {"plan": planned, "baselines": report.baselines(data["held"], size=size), "gate": result["gate"],
             "sft_steps_run": result["sft_steps_run"], "sft_checks": result["sft_checks"],
             "sft_loss": result["sft_loss"], "times": dict(result["times"]),
             "warm_start_test": report.paired(runs[("base", 0)], runs[("warm start", 0)], "the base model",
                                              "the warm start")}
    if not result["gate"]["passed"] and not args.ignore_gate:
        entry["evaluations"] = [report.figures(stage, step, items, size=size) for (stage, step), items in runs.items()]
        entry["verdict"] = [f"{name}: the warm start failed the gate; GRPO not run (--ignore-gate runs it)"]
        return entry, outcome_rows(name, runs)
    grpo = folder / "grpo"
    if not args.report_only:
        shutil.rmtree(grpo, ignore_errors=True)  # GRPO starts again from the warm start
        mark = time.perf_counter()
        try:
            train(STAGE, folder / "data", sft_model, grpo, args.grpo_steps, overrides=grpo_overrides(grpo, args))
        except OutOfMemory as err:
            raise RearankError(f"{name}: GRPO stopped: {err.reason} (log {err.log}); close other jobs; rerunning the "
                               "same command reads the warm start back and restarts GRPO") from None
        entry["times"]["grpo_s"] = round(time.perf_counter() - mark)
    found = {step: path for step, path in checkpoints(grpo).items() if step in planned["evaluation_steps"]}
    if not found:
        raise RearankError(f"{name}: no GRPO checkpoint in {grpo / 'checkpoints'} to evaluate")
    mark = time.perf_counter()
    runs |= {("grpo", step): items for step, items in
             evaluate_checkpoints(found, data["held"], args.threads, size).items()}
    entry["times"]["grpo_eval_s"] = round(time.perf_counter() - mark)
    entry["evaluations"] = [report.figures(stage, step, items, size=size) for (stage, step), items in runs.items()]
    entry["paired_test"] = report.paired(runs[("warm start", 0)], runs[("grpo", max(found))],
                                         "the warm start (step 0)", f"grpo step {max(found)}")
    entry["missing_evaluations"] = report.missing(planned, [0, *found])
    spread = report.zero_spread(grpo / "rollouts")
    entry["training"] = [{**row, "zero_spread": spread.get(row["step"])} for row in
                         report.training_rows(merge_metrics(grpo))]
    entry["times"]["grpo_steps_s"] = round(sum(row.get("step_s", 0.0) for row in entry["training"]))
    entry["verdict"] = report.verdict(name, planned, entry["evaluations"], entry["paired_test"], entry["baselines"],
                                      size=size)
    return entry, outcome_rows(name, runs)


def outcome_rows(name: str, runs: dict[tuple[str, int], list[dict]]) -> list[dict]:
    """Every evaluation's outcomes as the rows of ``<output stem>_<variant>_outcomes.jsonl.gz`` (``task``: the
    variant's name)."""
    return [{"task": name, "stage": stage, "step": step, **{k: o[k] for k in ("item", "qid", "gold", "answer")}}
            for (stage, step), items in runs.items() for o in items]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m recipes.learn", description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--task", action="append", choices=TASKS, help="task to run (repeatable; default relevance)")
    parser.add_argument("--out", type=Path, default=Path("runs/train-learn"), help="working folder")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT,
                        help="figures JSON (the PNG and <stem>_<variant>_outcomes.jsonl.gz beside it)")
    parser.add_argument("--set-size", type=int, default=DEFAULT_SET_SIZE,
                        help="passages a window shows (at least 2; 2 is issue #45's fallback, labelled "
                             "'<task>, 2 passages' in the figures, the curves and the verdict)")
    parser.add_argument("--windows-per-query", type=int, default=32, help="dl21 windows drawn per query")
    parser.add_argument("--heldout", type=int, default=512, help="held-out dl19 windows (a multiple of --set-size)")
    parser.add_argument("--sft-steps", type=int, default=48, help="most SFT steps (it stops earlier: --sft-until)")
    parser.add_argument("--sft-batch", type=int, default=16)
    parser.add_argument("--sft-lr", type=float, default=5e-5)
    parser.add_argument("--sft-right", type=float, default=1.0,
                        help="share of SFT targets that are the label (the rest: another id at random)")
    parser.add_argument("--sft-check-every", type=int, default=8, help="check the warm start every N SFT steps")
    parser.add_argument("--sft-until", type=float, default=None,
                        help="stop SFT at the first check where its answers agree with the probe's labels on at "
                             "least this share (partial skill) and no position takes more of them than the "
                             "gate allows (40%% at 4 passages, 60%% at 2); default a third of the way from chance "
                             "to 1: 0.5 at 4 passages, 0.667 at 2")
    parser.add_argument("--gate-prompts", type=int, default=32, help="prompts of the SFT checks and of the gate")
    parser.add_argument("--grpo-steps", type=int, default=56)
    parser.add_argument("--prompts-per-step", type=int, default=8,
                        help="a multiple of --set-size: each step's prompts are balanced by the best passage's "
                             "position")
    parser.add_argument("--rollouts", type=int, default=4, help="answers per prompt (the GRPO group)")
    parser.add_argument("--lr", type=float, default=5e-6, help="GRPO learning rate")
    parser.add_argument("--kl", type=float, default=0.01, help="KL loss coefficient (low_var_kl; 0: off)")
    parser.add_argument("--eval-every", type=int, default=14,
                        help="save and evaluate a checkpoint every N GRPO steps (and at the last)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads of every process")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ignore-gate", action="store_true", help="run GRPO even when the warm start fails the gate")
    parser.add_argument("--report-only", action="store_true",
                        help="train nothing: evaluate what the task's folder holds under the plan recorded in "
                             "--output (its settings, not this command line's; a run stopped before its plan is "
                             "marked so)")
    return parser


def planned_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The settings a plan records: the command line's (``set_size`` among them), less :data:`NOT_PLANNED`, and the
    fixed ones."""
    return {**{k: v for k, v in vars(args).items() if k not in NOT_PLANNED}, "response_tokens": RESPONSE_TOKENS,
            "trainer": "verl", "recipe": f"recipes/{STAGE.recipe}.yaml", "reward": REWARD}


def plan_args(args: argparse.Namespace, planned: dict[str, Any]) -> argparse.Namespace:
    """``args`` with every planned setting replaced by the plan's (``--report-only``)."""
    return argparse.Namespace(**{**vars(args), **{k: v for k, v in planned["settings"].items() if k in vars(args)}})


def read_figures(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("tasks", {})
    except json.JSONDecodeError as err:
        raise RearankError(f"{path}: not JSON ({err}); move it away or give another --output") from None


def earlier_attempts(entry: dict[str, Any], output: Path, stem: str) -> list[dict[str, Any]]:
    """What a new plan keeps of the entry it replaces: the entry's earlier attempts, then the entry itself if it ran
    (``attempt`` N; its per-item outcomes file renamed ``<output stem>_<stem>_attemptN_outcomes.jsonl.gz``, ``stem``
    being the variant's :func:`file_name`)."""
    kept = list(entry.get("earlier_attempts", []))
    if "verdict" in entry:
        number = len(kept) + 1
        outcomes = output.with_name(f"{output.stem}_{stem}_outcomes.jsonl.gz")
        renamed = output.with_name(f"{output.stem}_{stem}_attempt{number}_outcomes.jsonl.gz")
        if outcomes.exists():
            outcomes.replace(renamed)
        kept.append({**{k: v for k, v in entry.items() if k != "earlier_attempts"}, "attempt": number,
                     **({"outcomes_file": renamed.name} if renamed.exists() else {})})
    return kept


def write_figures(path: Path, tasks: dict[str, Any]) -> None:
    """The figures JSON: every entry (named by :func:`variant`), task by task, each task's variants by name."""
    ordered = {name: tasks[name] for task in TASKS for name in sorted(tasks) if name.split(",")[0] == task}
    figures = {"trainer": "verl", "model": "SmolLM2-135M-Instruct (embedded GGUF), full fine-tune, float32",
               "recipe": f"recipes/{STAGE.recipe}.yaml", "reward": "recipes.learn.reward.compute_score",
               "tasks": ordered}
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as out:
        out.write(json.dumps(figures, indent=1) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.output.suffix != ".json":
        print(f"train-learn: --output {args.output}: give a .json path (the PNG goes beside it)", file=sys.stderr)
        return 1
    if args.sft_until is None:
        args.sft_until = sft_until(args.set_size)
    if not args.report_only and (problem := settings_error(args)):
        print(f"train-learn: {problem}", file=sys.stderr)
        return 1
    import os

    try:
        os.environ["REARANK_DATA"] = str(shared())
        tasks = read_figures(args.output)
        for task in args.task or ["relevance"]:
            name = variant(task, args.set_size)  # the entry: "relevance", or "relevance, 2 passages"
            if args.report_only:  # the plan recorded before the run decides, not this command line
                planned = tasks.get(name, {}).get("plan")
                if planned is None:
                    raise RearankError(f"--report-only: {args.output} holds no plan for {name}")
                task_args = plan_args(args, planned)
            else:
                task_args, planned = args, report.plan(task, planned_settings(args))
                earlier = earlier_attempts(tasks.get(name, {}), args.output, file_name(name))
                tasks[name] = {"plan": planned, "status": "planned; not run yet",
                               **({"earlier_attempts": earlier} if earlier else {})}
                write_figures(args.output, tasks)  # the plan is on record before anything trains
            before = tasks.get(name, {})
            started = time.perf_counter()
            entry, rows = run_task(task, args.out.resolve(), task_args, planned)
            entry["wall_s"] = round(time.perf_counter() - started)
            if args.report_only:  # the training's own times stay those the training run recorded
                entry.setdefault("times", {}).update({k: v for k, v in before.get("times", {}).items() if k == "grpo_s"})
                entry["wall_s"] = before.get("wall_s", entry["wall_s"])
            earlier = {k: before[k] for k in ("earlier_attempts",) if k in before}
            tasks[name] = {**entry, "plan": planned, **earlier}  # the plan recorded before the run, whatever ran
            report.write_outcomes(args.output.with_name(f"{args.output.stem}_{file_name(name)}_outcomes.jsonl.gz"),
                                  rows)
            write_figures(args.output, tasks)
            for line in entry["verdict"]:
                print(line, flush=True)
    except RearankError as err:
        print(f"train-learn: {err}", file=sys.stderr)
        return 1
    report.plot({t: r for t, r in tasks.items() if "evaluations" in r}, args.output.with_suffix(".png"))
    print(f"figures: {args.output}\ncurves: {args.output.with_suffix('.png')}")
    return 0
