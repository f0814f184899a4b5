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
from recipes.checks.cpu import merge_metrics, runtime_env, train
from recipes.checks.data import shared
from recipes.checks.sft import train_on_answers
from recipes.checks.table import STAGES
from recipes.learn import report
from recipes.learn.reward import compute_score
from recipes.learn.windows import SET_SIZE, TASKS, windows

TRAIN_SET, HELD_OUT = "dl21", "dl19"
#: The verl recipe the GRPO stage runs (its algorithm, optimiser and loss; sizes and reward as overridden here).
STAGE = STAGES["rearank"]
RESPONSE_TOKENS = 8
DEFAULT_OUTPUT = Path("docs/figures/train_learn.json")
#: The settings a saved warm start (``<out>/<task>/warm_start.json``) must match to be reused.
WARM_START_SETTINGS = ("windows_per_query", "heldout", "sft_steps", "sft_batch", "sft_lr", "sft_right",
                       "sft_check_every", "sft_until", "gate_prompts", "rollouts", "eval_temperature", "threads",
                       "seed")


def encode(tokenizer: Any, messages: Sequence[dict]) -> list[int]:
    return tokenizer.apply_chat_template([dict(m) for m in messages], add_generation_prompt=True, tokenize=True,
                                         return_dict=True)["input_ids"]


def build_data(task: str, folder: Path, args: argparse.Namespace) -> tuple[list[dict], list[dict], list[dict]]:
    """SFT rows and GRPO prompts from dl21, held-out windows from dl19; the GRPO and held-out rows are written as
    verl parquet (``train.parquet``, ``val.parquet``) in ``folder``."""
    import pandas as pd

    from rearank.data.packs import load_qrels, load_requests

    rng = random.Random(args.seed)
    train_rows = list(windows(task, TRAIN_SET, load_requests(dataset=TRAIN_SET), load_qrels(TRAIN_SET),
                              args.windows_per_query, args.seed))
    rng.shuffle(train_rows)
    sft_n, grpo_n = args.sft_steps * args.sft_batch, args.grpo_steps * args.prompts_per_step
    if len(train_rows) < sft_n + grpo_n:
        raise RearankError(f"{task}: {len(train_rows)} {TRAIN_SET} windows, {sft_n} SFT + {grpo_n} GRPO needed; "
                           "raise --windows-per-query")
    held = list(windows(task, HELD_OUT, load_requests(dataset=HELD_OUT), load_qrels(HELD_OUT),
                        args.windows_per_query, args.seed + 1))
    if len(held) < args.heldout:
        raise RearankError(f"{task}: {len(held)} {HELD_OUT} windows, --heldout {args.heldout} asked")
    held = rng.sample(held, args.heldout)
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in (("train.parquet", train_rows[sft_n:sft_n + grpo_n]), ("val.parquet", held)):
        with atomic_path(folder / name) as tmp:
            pd.DataFrame(rows).to_parquet(tmp)
    return train_rows[:sft_n], train_rows[sft_n:sft_n + grpo_n], held


def sft_examples(rows: Sequence[dict], tokenizer: Any, right: float, seed: int) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, answer ids): the target is the best passage's id with probability ``right``, else one of the
    other three at random, so the targets' positions stay balanced and the policy keeps variance."""
    rng = random.Random(seed)
    examples = []
    for row in rows:
        target = row["extra_info"]["target"]
        if rng.random() >= right:
            target = rng.choice([k for k in range(1, SET_SIZE + 1) if k != target])
        answer = tokenizer.encode(f"[{target}]", add_special_tokens=False) + [tokenizer.eos_token_id]
        examples.append((encode(tokenizer, row["prompt"]), answer))
    return examples


def answers(model: Any, tokenizer: Any, rows: Sequence[dict], samples: int = 0, batch: int = 32,
            temperature: float = 1.0) -> list[list[str]]:
    """Per row, one greedy answer (``samples`` 0) or ``samples`` answers sampled at ``temperature``."""
    import torch

    out: list[list[str]] = []
    with torch.no_grad():
        for start in range(0, len(rows), batch):
            chunk = [[dict(m) for m in r["prompt"]] for r in rows[start:start + batch]]
            enc = tokenizer.apply_chat_template(chunk, add_generation_prompt=True, return_tensors="pt",
                                                padding=True, return_dict=True)
            n = max(samples, 1)
            options = ({"do_sample": True, "temperature": temperature, "top_p": 1.0, "top_k": 0,
                        "num_return_sequences": n}
                       if samples else {"do_sample": False, "temperature": None, "top_p": None, "top_k": None})
            generated = model.generate(**enc, max_new_tokens=RESPONSE_TOKENS, pad_token_id=tokenizer.pad_token_id,
                                       **options)
            texts = tokenizer.batch_decode(generated[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
            out += [texts[i:i + n] for i in range(0, len(texts), n)]
    return out


def evaluated(model: Any, tokenizer: Any, rows: Sequence[dict], temperature: float) -> list[dict]:
    """One scored answer per row, as verl's validation answers (``--eval-temperature``; 0: greedy)."""
    texts = answers(model, tokenizer, rows, samples=int(temperature > 0), temperature=temperature)
    return scored([t[0] for t in texts], rows)


def scored(texts: Sequence[str], rows: Sequence[dict]) -> list[dict]:
    """Each answer scored by the reward verl uses, with the prompt as verl's dumps key it."""
    return [{**compute_score(r["data_source"], t, r["reward_model"]["ground_truth"]), "output": t,
             "input": json.dumps(r["prompt"])} for t, r in zip(texts, rows, strict=True)]


def balanced(rows: Sequence[dict], n: int) -> list[dict]:
    """The first rows with at most ``n // SET_SIZE`` per best position: on them a reader that is always right spreads
    its picks evenly, so the gate's largest position share measures a habit, not the draw of the rows."""
    taken = dict.fromkeys(range(1, SET_SIZE + 1), 0)
    out = []
    for row in rows:
        target = row["extra_info"]["target"]
        if taken[target] < n // SET_SIZE:
            taken[target] += 1
            out.append(row)
    return out


def grpo_overrides(folder: Path, args: argparse.Namespace) -> list[str]:
    """The GRPO stage's changes to the recipe's CPU run: sizes, the one-action reward, validation inside verl."""
    return [
        f"data.train_batch_size={args.prompts_per_step}", f"data.max_response_length={RESPONSE_TOKENS}",
        f"actor_rollout_ref.rollout.n={args.rollouts}",
        # one update a step: the rollout's log-probs are the old policy's (verl's bypass mode skips the recompute)
        f"actor_rollout_ref.actor.ppo_mini_batch_size={args.prompts_per_step}",
        "algorithm.rollout_correction.bypass_mode=true",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=4096", f"actor_rollout_ref.actor.optim.lr={args.lr}",
        "actor_rollout_ref.actor.use_kl_loss=false",
        "reward.custom_reward_function.path=pkg://recipes.learn.reward",
        "reward.custom_reward_function.name=compute_score", "reward.custom_reward_function.reward_kwargs={}",
        "trainer.save_freq=-1", f"trainer.test_freq={args.eval_every}", "trainer.val_before_train=true",
        f"actor_rollout_ref.rollout.val_kwargs.do_sample={str(args.eval_temperature > 0).lower()}",
        f"actor_rollout_ref.rollout.val_kwargs.temperature={args.eval_temperature}",
        "actor_rollout_ref.rollout.val_kwargs.top_p=1.0", "actor_rollout_ref.rollout.val_kwargs.top_k=-1",
        "actor_rollout_ref.rollout.val_kwargs.n=1",
        f"trainer.validation_data_dir={folder / 'validation'}", f"trainer.rollout_data_dir={folder / 'rollouts'}",
        f"data.seed={args.seed}", *runtime_env({"OMP_NUM_THREADS": str(args.threads)}),
    ]


def warm_start(task: str, sft_rows: list[dict], grpo_rows: list[dict], held: list[dict], target: Path,
               args: argparse.Namespace) -> dict[str, Any]:
    """The base model's held-out answers, the warm start (saved to ``target``), its held-out answers and its gate."""
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
    model.eval()
    evaluations = [report.figures("base", 0, evaluated(model, tokenizer, held, args.eval_temperature))]
    times["base_eval_s"] = round(time.perf_counter() - mark)
    probe = balanced(grpo_rows, args.gate_prompts)

    def gate_of(greedy: list[dict]) -> dict[str, Any]:
        sampled = [scored(group, [row] * len(group)) for group, row in
                   zip(answers(model, tokenizer, probe, samples=args.rollouts), probe, strict=True)]
        return report.gate(sampled, greedy)

    checks: list[dict[str, Any]] = []

    def check(step: int) -> bool:
        """Stop the warm start once it reads the passages (greedy top-1 on the gate's training prompts at least
        ``--sft-until``) and passes the gate there."""
        model.eval()
        greedy = scored([a[0] for a in answers(model, tokenizer, probe)], probe)
        top1 = sum(i["top1"] for i in greedy) / len(greedy)
        result = gate_of(greedy)
        checks.append({"step": step, "greedy_top1": top1, **{k: result[k] for k in
                       ("format_valid", "zero_spread", "largest_position_share", "passed")}})
        print(f"{task}: SFT step {step}: {checks[-1]}", flush=True)
        model.train()
        return result["passed"] and top1 >= args.sft_until

    mark = time.perf_counter()
    losses = train_on_answers(model, sft_examples(sft_rows, tokenizer, args.sft_right, args.seed), args.sft_steps,
                              args.sft_lr, args.sft_batch, tokenizer.pad_token_id, args.seed,
                              check=check, every=args.sft_check_every)
    times["sft_s"] = round(time.perf_counter() - mark)
    mark = time.perf_counter()
    held_answers = evaluated(model, tokenizer, held, args.eval_temperature)
    evaluations.append(report.figures("sft", len(losses), held_answers))
    gate = gate_of(scored([a[0] for a in answers(model, tokenizer, held)], held))
    times["gate_s"] = round(time.perf_counter() - mark)
    print(f"{task}: {evaluations[0]}\n{task}: {evaluations[1]}\n{task}: gate {gate}", flush=True)
    with atomic_folder(target, replace=True) as tmp:
        model.save_pretrained(tmp)
        load_tokenizer(base).save_pretrained(tmp)
        model.generation_config.save_pretrained(tmp)
    return {"evaluations": evaluations, "gate": gate, "sft_loss": losses, "sft_checks": checks, "times": times}


def save_warm_start(task: str, sft_rows: list[dict], grpo_rows: list[dict], held: list[dict], folder: Path,
                    args: argparse.Namespace, settings: dict[str, Any]) -> None:
    """The warm start (``sft-model``) and what it measured (``warm_start.json``, with the ``settings`` it was made
    with) in ``folder``."""
    result = {**warm_start(task, sft_rows, grpo_rows, held, folder / "sft-model", args), "settings": settings}
    with atomic_write(folder / "warm_start.json") as handle:
        handle.write(json.dumps(result, indent=1) + "\n")


def run_task(task: str, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    folder = out / task
    sft_rows, grpo_rows, held = build_data(task, folder / "data", args)
    print(f"{task}: {len(sft_rows)} SFT rows, {len(grpo_rows)} GRPO prompts ({TRAIN_SET}), {len(held)} held-out "
          f"({HELD_OUT})", flush=True)
    sft_model, saved = folder / "sft-model", folder / "warm_start.json"
    made_with = {key: getattr(args, key) for key in WARM_START_SETTINGS}
    if saved.is_file() and (sft_model / "config.json").is_file():  # an interrupted run resumes after its warm start
        result = json.loads(saved.read_text(encoding="utf-8"))
        if result.get("settings") != made_with:
            raise RearankError(f"{saved}: made with {result.get('settings')}, asked {made_with}; delete "
                               f"{saved} to make the warm start again")
        print(f"{task}: warm start, its evaluations and gate read back from {saved}", flush=True)
    else:  # in a child process, so that the memory it holds is returned before verl starts
        child = multiprocessing.get_context("spawn").Process(
            target=save_warm_start, args=(task, sft_rows, grpo_rows, held, folder, args, made_with), name=f"{task}-warm-start")
        child.start()
        child.join()
        if child.exitcode != 0 or not saved.is_file():
            raise RearankError(f"{task}: the warm start's process ended with exit code {child.exitcode} and no "
                               f"{saved} (its error is printed above)")
        result = json.loads(saved.read_text(encoding="utf-8"))
    evaluations, gate, times = result["evaluations"], result["gate"], result["times"]
    if not gate["passed"] and not args.ignore_gate:
        result["verdict"] = [f"{task}: the warm start failed the gate; GRPO not run (--ignore-gate runs it)"]
        return result
    if not args.report_only:
        shutil.rmtree(folder / "grpo", ignore_errors=True)  # no checkpoints kept: GRPO starts again from the warm start
        mark = time.perf_counter()
        train(STAGE, folder / "data", sft_model, folder / "grpo", args.grpo_steps,
              overrides=grpo_overrides(folder / "grpo", args))
        times["grpo_s"] = round(time.perf_counter() - mark)
    elif not (folder / "grpo" / "validation").is_dir():
        raise RearankError(f"--report-only: no GRPO validations in {folder / 'grpo' / 'validation'}")
    runs = report.validations(folder / "grpo" / "validation")
    evaluations += [report.figures("grpo", step, items) for step, items in runs.items()]
    first, last = min(runs), max(runs)
    test = report.paired(runs[first], runs[last], f"grpo step {first} (the warm start, inside verl)",
                         f"grpo step {last}")
    spread = report.zero_spread(folder / "grpo" / "rollouts")
    training = [{**row, "zero_spread": spread.get(row["step"])} for row in
                report.training_rows(merge_metrics(folder / "grpo"))]
    times["grpo_steps_s"] = round(sum(row.get("step_s", 0.0) for row in training))  # verl's own, validations apart
    return {**result, "paired_test": test, "training": training,
            "verdict": report.verdict(task, evaluations, test)}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m recipes.learn", description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--task", action="append", choices=TASKS, help="task to run (repeatable; default both)")
    parser.add_argument("--out", type=Path, default=Path("runs/train-learn"), help="working folder")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="figures JSON (the PNG beside it)")
    parser.add_argument("--windows-per-query", type=int, default=32, help="windows drawn per query")
    parser.add_argument("--heldout", type=int, default=256, help="held-out dl19 windows")
    parser.add_argument("--sft-steps", type=int, default=64, help="most SFT steps (it stops earlier: --sft-until)")
    parser.add_argument("--sft-batch", type=int, default=16)
    parser.add_argument("--sft-lr", type=float, default=5e-5)
    parser.add_argument("--sft-right", type=float, default=0.8,
                        help="share of SFT targets that are right (the rest: another id at random), so that the "
                             "warm start reads the passages yet its sampled answers keep reward spread")
    parser.add_argument("--sft-check-every", type=int, default=4, help="check the warm start every N SFT steps")
    parser.add_argument("--sft-until", type=float, default=0.5,
                        help="stop SFT at the first check where greedy top-1 on the gate's training prompts is at "
                             "least this and the gate passes")
    parser.add_argument("--gate-prompts", type=int, default=32, help="training prompts sampled for the gate")
    parser.add_argument("--grpo-steps", type=int, default=20)
    parser.add_argument("--prompts-per-step", type=int, default=4)
    parser.add_argument("--rollouts", type=int, default=8, help="answers per prompt (the GRPO group)")
    parser.add_argument("--lr", type=float, default=2e-5, help="GRPO learning rate")
    parser.add_argument("--eval-every", type=int, default=10, help="validate inside verl every N steps")
    parser.add_argument("--eval-temperature", type=float, default=1.0,
                        help="held-out answers sampled at this temperature (0: greedy), in verl and before it: the "
                             "policy GRPO trains is the sampling one")
    parser.add_argument("--threads", type=int, default=2, help="torch threads of every process")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ignore-gate", action="store_true", help="run GRPO even when the warm start fails the gate")
    parser.add_argument("--report-only", action="store_true",
                        help="train nothing: report a task from what its folder holds (a GRPO run stopped early "
                             "reports up to its last validation)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.output.suffix != ".json":
        print(f"train-learn: --output {args.output}: give a .json path (the PNG goes beside it)", file=sys.stderr)
        return 1
    import os

    started = time.perf_counter()
    tasks: dict[str, Any] = {}
    try:
        os.environ["REARANK_DATA"] = str(shared())
        for task in args.task or TASKS:
            tasks[task] = run_task(task, args.out.resolve(), args)
            for line in tasks[task]["verdict"]:
                print(line, flush=True)
    except RearankError as err:
        print(f"train-learn: {err}", file=sys.stderr)
        return 1
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "task"}
    for result in tasks.values():
        result["settings"] = {**settings, "response_tokens": RESPONSE_TOKENS, "set_size": SET_SIZE}
        result["wall_s"] = round(time.perf_counter() - started)
    kept = {}
    if args.output.is_file():  # a task not run this time keeps the figures of its last run
        kept = {k: v for k, v in json.loads(args.output.read_text(encoding="utf-8")).get("tasks", {}).items()
                if k not in tasks}
    tasks = {task: {**kept, **tasks}[task] for task in TASKS if task in {**kept, **tasks}}
    figures = {"trainer": "verl", "model": "SmolLM2-135M-Instruct (embedded GGUF), full fine-tune, float32",
               "recipe": f"recipes/{STAGE.recipe}.yaml", "reward": "recipes.learn.reward.compute_score",
               "tasks": tasks}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(args.output) as out:
        out.write(json.dumps(figures, indent=1) + "\n")
    report.plot(tasks, args.output.with_suffix(".png"))
    print(f"figures: {args.output}\ncurves: {args.output.with_suffix('.png')}")
    return 0
