"""``make train-cpu``: real verl GRPO steps on CPU for every verl recipe, then a resume, an export and a rerank.

For each recipe (``rearank``, ``grouprank``, ``reasonrank``, ``barrag_selector``, ``barrag_generator``, ``arena``;
``barrag`` means both BAR-RAG stages) this runs, in child processes:

1. ``rearank synth`` on the shared data into ``<out>/<recipe>/data`` (small: a few sets of 5 passages);
2. ``python -m verl.trainer.main_ppo`` with the recipe's own file and only size overrides (batch, rollout n,
   lengths, steps, device, model path; :func:`size_overrides`) for 2 steps, with ``VERL_PLATFORM=cpu`` so that the
   plugin ``recipes.verl_cpu`` supplies the CPU platform and the transformers rollout; checkpoints every step;
3. the same command again with ``trainer.total_training_steps=3``: verl resumes from ``global_step_2``;
4. ``python -m recipes.checks.export`` (verl's FSDP model merger) into ``<out>/<recipe>/export``;
5. the exported folder in use: ``rearank rerank --backend hf`` on two dl19 queries (listwise; groupwise for
   grouprank) or ``rearank rag eval`` on two HotpotQA questions (BAR-RAG selector / generator, ARENA).

``reasonrank`` runs steps 1 and 2 only: its GRPO (verl, the listwise prompt, its own reward and data); the resume,
export and rerank that follow are ``rearank``'s machinery on the same listwise format, checked there.

``<out>/<recipe>/metrics.jsonl`` holds one JSON object per training step with verl's metric names (from verl's
``file`` logger); checkpoints are in ``<out>/<recipe>/checkpoints``, console logs in ``<out>/<recipe>/logs``.

    python -m recipes.checks.cpu [--recipe NAME ...] [--out DIR] [--model tiny|smollm2|PATH] [--overwrite]

``--model tiny`` (default): a randomly initialised model of SmolLM2's architecture (2 layers, hidden 64) with
SmolLM2's tokenizer, made once in the rearank cache; ``smollm2``: SmolLM2-135M-Instruct converted from the embedded
GGUF. See docs/training.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rearank.errors import RearankError
from rearank.io.files import atomic_folder, atomic_write, iter_json_lines
from rearank.methods.card import RANK, SELECTOR, card
from recipes import RECIPES_DIR
from recipes.checks.completions import warm_start_texts
from recipes.checks.data import shared
from recipes.checks.models import load_model, load_tokenizer, model_path, tiny_base
from recipes.checks.serving import reader_server
from recipes.checks.sft import train_on_answers
from recipes.checks.table import DEFAULT, QA, QA_EVAL, RECIPES, STAGES, Stage

WARMUP_STEPS = 120
STEPS, RESUMED_STEPS = 2, 3


def warm_start(stage: Stage, data: Path, target: Path, base: Path | None = None) -> Path:
    """The tiny base model trained for :data:`WARMUP_STEPS` steps to answer the stage's training prompts with one of
    :func:`~recipes.checks.completions.warm_start_texts`, drawn at random. A random model writes text every reward
    scores alike, so all GRPO advantages and gradients would be zero; this one's samples differ in reward, so the actor update has a nonzero
    gradient. It checks the mechanics of training, never quality. ``base``: another tiny base (default
    :func:`~recipes.checks.models.tiny_base`)."""
    if (target / "config.json").is_file():
        return target
    import pandas as pd
    import torch

    base = base or tiny_base()
    tokenizer = load_tokenizer(base)
    rows = pd.read_parquet(data / "train.parquet")
    examples = []
    for prompt, reward in zip(rows["prompt"], rows["reward_model"], strict=True):
        ids = tokenizer.apply_chat_template([dict(m) for m in prompt], add_generation_prompt=True, tokenize=True,
                                            return_dict=True)["input_ids"][-stage.prompt_tokens:]
        for text in warm_start_texts(stage.name, reward["ground_truth"]):
            answer = tokenizer.encode(text, add_special_tokens=False)[: stage.response_tokens - 1]
            examples.append((ids, answer + [tokenizer.eos_token_id]))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # matrices this small run fastest on one thread, above all on a busy machine
    torch.manual_seed(0)
    model = load_model(base)
    train_on_answers(model, examples, WARMUP_STEPS, lr=3e-3, batch=8, pad_id=tokenizer.eos_token_id)
    torch.set_num_threads(threads)
    with atomic_folder(target, replace=True) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        for name in ("generation_config.json",):
            shutil.copy(base / name, tmp / name)
    return target


def runtime_env(env: dict[str, str]) -> list[str]:
    """Hydra overrides that give every Ray worker these environment variables (verl's ``ray_kwargs.ray_init
    .runtime_env``; on a cluster the workers do not inherit the launching shell's environment)."""
    return ["++ray_kwargs.ray_init.runtime_env.env_vars.{}='{}'".format(k, v.replace("'", "\\'"))
            for k, v in env.items()]


def fitted_prompt_tokens(stage: Stage, data: Path, model: Path) -> int:
    """The longest prompt of the stage's rows (chat template applied, as verl's dataset applies it) rounded up to 64
    tokens, at most the stage's ``prompt_tokens``: verl pads every prompt to ``data.max_prompt_length``, and on CPU
    the full-vocabulary logits of that padding are most of a step's time."""
    import pandas as pd
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    longest = max(len(tokenizer.apply_chat_template([dict(m) for m in prompt], add_generation_prompt=True,
                                                    tokenize=True, return_dict=True)["input_ids"])
                  for name in ("train.parquet", "val.parquet") for prompt in pd.read_parquet(data / name)["prompt"])
    return min(stage.prompt_tokens, -(-longest // 64) * 64)


def size_overrides(stage: Stage, data: Path, model: Path, ckpt: Path, steps: int, nnodes: int = 1,
                   joins_cluster: bool = False, env: dict[str, str] | None = None,
                   prompt_tokens: int | None = None) -> list[str]:
    """The recipe's run on CPU: sizes, device, model, and the CPU plumbing (rollout name, Ray resources, attention
    kernel, FSDP2, ``VERL_PLATFORM=cpu`` for every Ray worker); algorithm, reward and optimiser values stay the
    recipe's. GroupRank's GRPO starts from the folder its recipe reads from ``GROUPRANK_SFT_MODEL`` (set through
    Ray's runtime_env, as recipes/train.sh sets it after the SFT stage); the others get ``model.path``.
    ``nnodes``: one training process ("GPU" slot) a node; ``joins_cluster``: Ray is already running (RAY_ADDRESS),
    so no Ray resources are declared; ``env``: more variables for every Ray worker; ``prompt_tokens``: the prompt
    length (:func:`fitted_prompt_tokens`; default the stage's)."""
    env = dict(env or {})
    if stage.name == "grouprank":
        env["GROUPRANK_SFT_MODEL"] = str(model)
    return [
        f"data.train_files={data}/train.parquet", f"data.val_files={data}/val.parquet",
        *([] if stage.name == "grouprank" else [f"actor_rollout_ref.model.path={model}"]),
        "actor_rollout_ref.model.use_remove_padding=false",  # needs flash-attn
        "actor_rollout_ref.model.override_config.attn_implementation=sdpa",
        *cpu_overrides(stage, steps, nnodes, joins_cluster, env, prompt_tokens),
        f"trainer.nnodes={nnodes}", "trainer.n_gpus_per_node=1", f"trainer.default_local_dir={ckpt}",
    ]


def cpu_overrides(stage: Stage, steps: int, nnodes: int = 1, joins_cluster: bool = False,
                  env: dict[str, str] | None = None, prompt_tokens: int | None = None) -> list[str]:
    """:func:`size_overrides` less what ``recipes/train.sh`` sets itself (data files, model, attention kernel, node
    count, GPUs a node, checkpoint folder): what ``TRAIN_DEVICE=cpu recipes/train.sh`` adds
    (:mod:`recipes.checks.cpu_launch`). ``nnodes``: the Ray "GPU" slots to declare when Ray is not running yet."""
    prompt_tokens = prompt_tokens or stage.prompt_tokens
    longest = prompt_tokens + stage.response_tokens
    return [
        "data.train_batch_size=4", f"data.max_prompt_length={prompt_tokens}",
        f"data.max_response_length={stage.response_tokens}", "data.dataloader_num_workers=0",
        *runtime_env({"VERL_PLATFORM": "cpu", **(env or {})}),
        "actor_rollout_ref.model.enable_gradient_checkpointing=false",
        "actor_rollout_ref.actor.strategy=fsdp2", "actor_rollout_ref.ref.strategy=fsdp2",  # FSDP1 needs a device
        # float32 compute: verl's FSDP default (bf16 parameters) is emulated, and slow, on a CPU without AVX512-BF16,
        # and the rollout server generates in float32; no torch.compile (it recompiles for each new batch shape)
        *(f"++actor_rollout_ref.{role}.fsdp_config.mixed_precision={{param_dtype:fp32,reduce_dtype:fp32,"
          "buffer_dtype:fp32}" for role in ("actor", "ref")),
        "actor_rollout_ref.actor.use_torch_compile=false",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4", # micro-batches of one sequence: full-vocabulary float32 logits of longer ones take gigabytes
        f"actor_rollout_ref.actor.ppo_max_token_len_per_gpu={longest}",
        "actor_rollout_ref.rollout.name=transformers", "actor_rollout_ref.rollout.n=4",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1", "actor_rollout_ref.rollout.agent.num_workers=1",
        "reward.num_workers=1",
        "trainer.device=cpu", "trainer.logger=[console,file]",
        f"trainer.total_training_steps={steps}", "trainer.save_freq=1", "trainer.test_freq=-1",
        "trainer.val_before_train=false", "trainer.resume_mode=auto", "trainer.max_actor_ckpt_to_keep=null",
        # LoRA recipes (BAR-RAG): the transformers rollout takes merged weights, verl's own switch for that sync
        *(["actor_rollout_ref.model.lora.merge=true"] if stage.name.startswith("barrag") else []),
        # one TransferQueue storage actor; Ray told of more CPUs than the machine's 2 and of one "GPU" slot a node
        "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
        *([] if joins_cluster else ["ray_kwargs.ray_init.num_cpus=16", f"+ray_kwargs.ray_init.num_gpus={nnodes}"]),
    ]


def sft_cpu_overrides(model: Path, steps: int) -> list[str]:
    """The SFT stage (``verl.trainer.sft_trainer``) on CPU: sizes and plumbing only (one process a node, FSDP2, no
    compile, no gradient checkpointing), less what ``recipes/train.sh`` sets itself (data files, attention kernel,
    nodes, checkpoint folder). ``model``: the model to fine-tune."""
    return [f"model.path={model}", "model.enable_gradient_checkpointing=false", "engine.strategy=fsdp2",
            "engine.use_torch_compile=false", "trainer.device=cpu", f"trainer.total_training_steps={steps}",
            "trainer.logger=[console]", "data.train_batch_size=2", "data.micro_batch_size_per_gpu=1",
            "data.max_length=2048", "data.max_token_len_per_gpu=4096", "data.num_workers=0"]


class OutOfMemory(RearankError):
    """A child process that failed because Ray's memory monitor killed its workers: ``reason`` says how many and
    the node's memory, as the log has them (:func:`ray_out_of_memory`); ``log`` is the child's log."""

    def __init__(self, command: str, reason: str, log: Path) -> None:
        self.reason, self.log = reason, log
        super().__init__(f"{command} failed: {reason} (log {log}); close other jobs and run the same command again")


def ray_out_of_memory(text: str) -> str | None:
    """What a log says when Ray's memory monitor killed workers (``ray.exceptions.OutOfMemoryError`` in it), in one
    line: "Ray killed N worker(s), the node running low on memory (X GB used / Y GB limit)", the figures of the last
    such report in the log; None when the log holds no such error."""
    if "ray.exceptions.OutOfMemoryError" not in text:
        return None
    killed = re.findall(r"(\d+) worker\(s\) were killed due to the node running low on memory", text)
    memory = re.findall(r"([\d.]+) ?GB used / ([\d.]+) ?GB limit", text)
    return (f"Ray killed {killed[-1] if killed else 'its'} worker(s), the node running low on memory"
            + (f" ({memory[-1][0]} GB used / {memory[-1][1]} GB limit)" if memory else ""))


def _run(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> float:
    """Run ``cmd`` with its output appended to ``log`` (and echoed); return its wall time; raise on failure: one
    line (:class:`OutOfMemory`) when Ray killed its workers for memory, else the end of the log."""
    log.parent.mkdir(parents=True, exist_ok=True)
    print("+ " + " ".join(cmd), flush=True)
    started = time.perf_counter()
    before = log.stat().st_size if log.exists() else 0
    with log.open("a", encoding="utf-8") as out:
        out.write("+ " + " ".join(cmd) + "\n")
        out.flush()
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, check=False)
    if proc.returncode:
        name = cmd[2] if len(cmd) > 2 else cmd[0]
        with log.open("rb") as written:
            written.seek(before)  # this run's output only: the log may hold earlier runs'
            reason = ray_out_of_memory(written.read().decode("utf-8", errors="replace"))
        if reason:
            raise OutOfMemory(name, reason, log)
        tail = "".join(log.read_text(encoding="utf-8", errors="replace").splitlines(True)[-25:])
        raise RearankError(f"{name} exited with {proc.returncode}; log {log}; its end:\n{tail}")
    return time.perf_counter() - started


def synthesize(stage: Stage, data: Path, log: Path) -> Path:
    if (data / "train.parquet").is_file():
        return data
    args = [a.replace("{data}", str(shared())) for a in stage.synth]
    _run([sys.executable, "-m", "rearank", "synth", *args, "--output-dir", str(data), "--quiet"], log)
    return data


@dataclass(frozen=True)
class Nodes:
    """Where verl runs: its own one-node Ray (``address`` None) or a running Ray cluster of ``count`` nodes, one
    training process each."""

    count: int = 1
    address: str | None = None


def merge_overrides(base: list[str], changes: list[str]) -> list[str]:
    """Hydra overrides ``base`` with each key ``changes`` sets (``+``/``++`` prefixes aside) replaced by its new
    value; new keys are appended (Hydra refuses a key given twice)."""
    def key(override: str) -> str:
        return override.split("=", 1)[0].lstrip("+")

    changed = {key(o): o for o in changes}
    return [changed.pop(key(o), o) for o in base] + list(changed.values())


def train(stage: Stage, data: Path, model: Path, folder: Path, steps: int, nodes: Nodes = Nodes(),
          overrides: list[str] | None = None) -> float:
    """One ``verl.trainer.main_ppo`` invocation; its metrics go to ``folder/logs/verl.<n>.jsonl``, n counting the
    invocations in ``folder`` (an interrupted run's log is kept: verl resumes from its checkpoint). The settings
    reach the Ray workers through verl's runtime_env, so they hold on a cluster joined at ``nodes.address`` too.
    ``overrides``: Hydra overrides that replace the CPU run's own (:func:`merge_overrides`)."""
    run = 1 + len(list((folder / "logs").glob("verl.*.jsonl")))
    settings = {"VERL_FILE_LOGGER_PATH": str(folder / "logs" / f"verl.{run}.jsonl"), "TOKENIZERS_PARALLELISM": "false"}
    if model.name == "tiny-model":
        # the tiny model's matrices run fastest on one thread per process, the rollout server's included
        settings.update(OMP_NUM_THREADS="1", REARANK_ROLLOUT_THREADS="1")
    # a Ray of its own unless told which cluster to join: ray.init would otherwise join a cluster another run started
    # on this machine (RAY_ADDRESS in the environment, or a `ray start` one) and then refuse num_cpus
    env = {**os.environ, **settings, "VERL_PLATFORM": "cpu", "RAY_DEDUP_LOGS": "0",
           "RAY_ADDRESS": nodes.address or "local"}
    folder_name, file_name = stage.recipe.split("/")
    cmd = [sys.executable, "-m", "verl.trainer.main_ppo", "--config-dir", str(RECIPES_DIR / folder_name),
           "--config-name", file_name,
           *merge_overrides(size_overrides(stage, data, model, folder / "checkpoints", steps, nodes.count,
                                           bool(nodes.address), settings, fitted_prompt_tokens(stage, data, model)),
                            overrides or [])]
    return _run(cmd, folder / "logs" / f"verl.{run}.log", env)


def merge_metrics(folder: Path) -> list[dict]:
    """verl's per-step logs of every invocation -> ``metrics.jsonl``, one object per step (the last run's wins)."""
    steps: dict[int, dict] = {}
    for log in sorted((folder / "logs").glob("verl.*.jsonl")):
        for _, record in iter_json_lines(log):
            data = record.get("data", {})
            if "training/global_step" in data:
                steps[int(data["training/global_step"])] = data
    rows = [steps[step] for step in sorted(steps)]
    with atomic_write(folder / "metrics.jsonl") as out:
        for row in rows:
            out.write(json.dumps(row, sort_keys=True) + "\n")
    return rows


def check_metrics(rows: list[dict], where: Path, steps: int = RESUMED_STEPS) -> None:
    """At least ``steps`` steps, each with a finite policy loss and a nonzero gradient norm."""
    if len(rows) < steps:
        raise RearankError(f"{where}: {len(rows)} steps logged, expected {steps}")
    for row in rows:
        loss, norm = row.get("actor/pg_loss"), row.get("actor/grad_norm")
        if loss is None or not math.isfinite(loss) or norm is None or not norm > 0:
            raise RearankError(f"{where}: step {row.get('training/global_step')}: pg_loss {loss}, grad_norm {norm}")


def use_export(stage: Stage, export: Path, folder: Path) -> list[str]:
    """The command that puts the exported model to work on two items; it writes under ``folder/use``."""
    use = folder / "use"
    method = card(stage.card)
    if method.kind == RANK:
        return [sys.executable, "-m", "rearank", "rerank", "--dataset", "dl19", "--max-queries", "2", "--backend",
                "hf", "--model", str(export), "--method", method.name, "--top-k", "10", "--max-new-tokens", "32",
                "--output", str(use / "run.trec"), "--no-progress"]
    qa = str(shared(QA_EVAL))
    common = [sys.executable, "-m", "rearank", "rag", "eval", "--data", qa, "--limit", "2", "--output-dir", str(use),
              "--no-progress", "--max-new-tokens", "32"]
    if method.kind == SELECTOR:
        return [*common, "--selector", f"barrag:{export}", "-S", "max_new_tokens=32", "--reader", "gold"]
    template = next(iter(method.templates))  # the reader card's own prompt
    return [*common, "--reader", "hf", "--reader-model", str(export), "--template", template]


def run_stage(stage: Stage, out: Path, model: Path | None, overwrite: bool, nodes: Nodes = Nodes()) -> dict:
    folder = out / stage.name
    if (folder / "metrics.jsonl").exists():
        if not overwrite:
            raise RearankError(f"{folder / 'metrics.jsonl'} exists; pass --overwrite (make train-cpu OVERWRITE=1) "
                               "to train again (the synthesized data is kept)")
        for name in ("checkpoints", "logs", "export", "use", "metrics.jsonl"):
            path = folder / name
            shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    data = synthesize(stage, folder / "data", folder / "logs" / "synth.log")
    timings = {}
    if model is None:
        started = time.perf_counter()
        model = warm_start(stage, data, folder / "tiny-model")
        timings["warm_start_s"] = round(time.perf_counter() - started, 1)
    if stage.name == "barrag_selector":
        with reader_server(shared(QA)) as url:
            os.environ["BARRAG_READER_URL"] = url
            timings.update(_train_twice(stage, data, model, folder, nodes))
    elif not stage.full:
        timings["first_run_s"] = round(train(stage, data, model, folder, STEPS, nodes), 1)
    else:
        timings.update(_train_twice(stage, data, model, folder, nodes))
    rows = merge_metrics(folder)
    check_metrics(rows, folder / "metrics.jsonl", RESUMED_STEPS if stage.full else STEPS)
    if not stage.full:
        return {"recipe": stage.name, "steps": len(rows), "metrics": str(folder / "metrics.jsonl"),
                "checkpoints": str(folder / "checkpoints"), **timings,
                "step_s": [round(row.get("timing_s/step", float("nan")), 1) for row in rows]}
    export = folder / "export"
    started = time.perf_counter()
    _run([sys.executable, "-m", "recipes.checks.export", str(folder / "checkpoints"), "--output-dir", str(export),
          "--force"], folder / "logs" / "export.log")
    timings["export_s"] = round(time.perf_counter() - started, 1)
    timings["use_s"] = round(_run(use_export(stage, export, folder), folder / "logs" / "use.log"), 1)
    return {"recipe": stage.name, "steps": len(rows), "metrics": str(folder / "metrics.jsonl"),
            "checkpoints": str(folder / "checkpoints"), "export": str(export), **timings,
            "step_s": [round(row.get("timing_s/step", float("nan")), 1) for row in rows]}


def _train_twice(stage: Stage, data: Path, model: Path, folder: Path, nodes: Nodes) -> dict:
    first = train(stage, data, model, folder, STEPS, nodes)
    second = train(stage, data, model, folder, RESUMED_STEPS, nodes)
    if not (folder / "checkpoints" / f"global_step_{RESUMED_STEPS}" / "actor").is_dir():
        raise RearankError(f"{folder / 'checkpoints'}: no global_step_{RESUMED_STEPS} after the resumed run")
    return {"first_run_s": round(first, 1), "resumed_run_s": round(second, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", action="append", choices=sorted(RECIPES),
                        help="recipe to run (repeatable; default: rearank, grouprank, barrag, arena)")
    parser.add_argument("--out", type=Path, default=Path("runs/train-cpu"), help="output folder (runs/train-cpu)")
    parser.add_argument("--model", default="tiny", help="tiny (random, SmolLM2 architecture; default), smollm2 "
                        "(SmolLM2-135M-Instruct from the embedded GGUF) or a Hugging Face folder")
    parser.add_argument("--overwrite", action="store_true", help="train again where metrics.jsonl exists")
    parser.add_argument("--ray-address", help="run on this running Ray cluster (one training process a node; its "
                        "nodes declare a GPU resource each, e.g. `ray start --num-gpus 1`) instead of a local Ray")
    parser.add_argument("--nnodes", type=int, default=1, help="nodes of that cluster to train on (1)")
    args = parser.parse_args(argv)
    if args.nnodes > 1 and not args.ray_address:
        parser.error("--nnodes above 1 needs --ray-address (a running Ray cluster)")
    stages = [STAGES[name] for recipe in (args.recipe or DEFAULT) for name in RECIPES[recipe]]
    try:
        os.environ["REARANK_DATA"] = str(shared())  # the synth and rerank children read the packs there
        model = model_path(args.model)
        out = args.out.resolve()
        for stage in stages:
            summary = run_stage(stage, out, model, args.overwrite, Nodes(args.nnodes, args.ray_address))
            print(json.dumps(summary), flush=True)
            print(f"{stage.name}: metrics {summary['metrics']}", flush=True)
            if "export" in summary:
                print(f"{stage.name}: export {summary['export']}", flush=True)
    except RearankError as err:
        print(f"train-cpu: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
