"""The GPU run behind ``recipes/gpu/run.sh``: the rearank recipe at a tiny size on one device, then its figures.

1. ``rearank doctor`` (on cuda it must pass the driver, NCCL, GPU, CUDA and verl checks);
2. the command ``DRY_RUN=1 RECIPE=rearank recipes/train.sh`` prints (the recipe's own file, the data folder, the
   attention kernel, the checkpoint root) with size overrides (:func:`overrides`), run for ``--steps`` GRPO steps:
   FSDP2, bf16 on cuda (float32 on CPU), SDPA, the transformers rollout; checkpoints every step;
3. the same command with one step more: verl resumes from the last checkpoint;
4. ``python -m recipes.checks.export`` of the last checkpoint, and ``rearank rerank --backend hf`` with it on two
   dl19 queries (``-O device=cuda`` on cuda);
5. ``<out>/gpu_train.json`` (:func:`figures`): device, driver, versions, per-step times, losses, gradient norms,
   peak GPU memory, and what differs from a cluster run -- the shape of docs/figures/gpu_train.json.

It reuses ``make train-cpu``'s pieces (recipes/checks/cpu.py: the size overrides, metrics, export use) and reads the
assets ``python -m recipes.gpu.carry assets`` writes (data, warm-started tiny model, dl19 pack).

    python -m recipes.gpu.run --assets DIR --out DIR [--device auto|cuda|cpu] [--steps 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rearank.errors import RearankError
from rearank.io.files import atomic_write
from recipes import RECIPES_DIR
from recipes.checks.cpu import (
    _run,
    check_metrics,
    fitted_prompt_tokens,
    merge_metrics,
    merge_overrides,
    size_overrides,
    use_export,
)
from recipes.checks.preflight import launch_commands
from recipes.checks.table import STAGES

STAGE = STAGES["rearank"]
PROJECT, EXPERIMENT = "gpu_run", "rearank_tiny"
#: Keys recipes/train.sh sets itself (Hydra refuses a key given twice): the data files, the attention kernel and
#: padding removal, the checkpoint folder, the node count.
TRAIN_SH_KEYS = ("data.train_files", "data.val_files", "actor_rollout_ref.model.use_remove_padding",
                 "actor_rollout_ref.model.override_config.attn_implementation", "trainer.default_local_dir",
                 "trainer.nnodes")
#: The doctor's checks a GPU run needs.
GPU_CHECKS = ("cuda", "driver", "nccl", "gpus", "verl")
#: What this run does unlike the recipe on a cluster (recipes/rearank/grpo.yaml), for the figures.
DIFFERENCES = (
    "one GPU (trainer.n_gpus_per_node=1), not 8; no second node",
    "a 3.2M-parameter model of SmolLM2's architecture warm-started on the synthesized data, not Qwen2.5-7B-Instruct",
    "the transformers rollout (recipes.verl_cpu.rollout, one left-padded batch per request group) instead of vLLM",
    "sdpa without padding removal (no flash-attn on the machine)",
    "FSDP2 for actor and reference; no gradient checkpointing, no torch.compile",
    "4 prompts x 4 rollouts a step, prompts cut to the data's longest, 64 response tokens",
    "Ray, verl and their small dependencies from the carry (recipes/gpu/carry.py), verl installed without its pins",
)


def overrides(assets: Path, ckpt: Path, steps: int, device: str, env: dict[str, str]) -> list[str]:
    """``make train-cpu``'s size overrides for the rearank recipe, made for ``device`` (cuda: bf16 parameters with
    float32 reductions), less the keys train.sh sets, plus the run's name; ``env`` reaches every Ray worker
    (``VERL_PLATFORM`` included)."""
    data, model = assets / "rl", assets / "model"
    base = size_overrides(STAGE, data, model, ckpt, steps, env=env,
                          prompt_tokens=fitted_prompt_tokens(STAGE, data, model))
    if device == "cuda":
        base = merge_overrides(base, [
            "trainer.device=cuda",
            *(f"++actor_rollout_ref.{role}.fsdp_config.mixed_precision={{param_dtype:bf16,reduce_dtype:fp32,"
              "buffer_dtype:fp32}" for role in ("actor", "ref")),
        ])
    kept = [o for o in base if o.split("=", 1)[0].lstrip("+") not in TRAIN_SH_KEYS]
    return [*kept, f"trainer.project_name={PROJECT}", f"trainer.experiment_name={EXPERIMENT}"]


def train(assets: Path, folder: Path, steps: int, device: str) -> float:
    """One run of the command train.sh prints; its metrics go to ``folder/logs/verl.<n>.jsonl``."""
    run = 1 + len(list((folder / "logs").glob("verl.*.jsonl")))
    settings = {"VERL_FILE_LOGGER_PATH": str(folder / "logs" / f"verl.{run}.jsonl"), "TOKENIZERS_PARALLELISM": "false",
                "VERL_PLATFORM": "nvidia" if device == "cuda" else "cpu"}
    if device == "cpu":  # the tiny model's matrices run fastest on one thread per process
        settings.update(OMP_NUM_THREADS="1", REARANK_ROLLOUT_THREADS="1")
    os.environ.update(REARANK_RL_DATA=str(assets / "rl"), CKPT_ROOT=str(folder / "checkpoints"), ATTN_IMPL="sdpa")
    commands = launch_commands("rearank", overrides(assets, folder / "checkpoints", steps, device, settings),
                               RECIPES_DIR)
    # RAY_ADDRESS=local: a Ray of its own; without it ray.init joins a cluster another run started on the machine
    # (`ray start`) and refuses the run's num_cpus ("When connecting to an existing cluster, num_cpus and num_gpus
    # must not be provided")
    env = {**os.environ, **settings, "RAY_DEDUP_LOGS": "0", "RAY_ADDRESS": "local"}
    return _run(commands[0].argv, folder / "logs" / f"verl.{run}.log", env)


def doctor(folder: Path, device: str) -> list[dict]:
    """``rearank doctor --json`` (with the GPU checks required on cuda); its rows."""
    args = [sys.executable, "-m", "rearank", "doctor", "--json"]
    if device == "cuda":
        args += ["--gpus-per-node", "1", *(f"--check={name}" for name in GPU_CHECKS)]
    log = folder / "logs" / "doctor.log"
    try:
        _run(args, log)
    except RearankError as err:
        raise RearankError(f"the preflight failed on this node: {err}") from None
    text = log.read_text(encoding="utf-8")
    return json.loads(text[text.index("\n[") + 1:text.rindex("]") + 1])


class GpuMemory:
    """The most GPU memory in use while the block runs, all processes together (the FSDP actor, the reference and
    the rollout server), sampled from ``nvidia-smi`` every ``every_s`` seconds; ``peak_mib`` stays None without it."""

    def __init__(self, every_s: float = 1.0) -> None:
        self.every_s, self.peak_mib = every_s, None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        exe = shutil.which("nvidia-smi")
        while exe and not self._stop.is_set():
            try:
                out = subprocess.run([exe, "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                                     capture_output=True, text=True, timeout=10, check=True).stdout
                used = sum(int(v) for v in out.split())
                self.peak_mib = max(self.peak_mib or 0, used)
            except (OSError, subprocess.SubprocessError, ValueError):
                return
            self._stop.wait(self.every_s)

    def __enter__(self) -> GpuMemory:  # noqa: PYI034 (Self needs Python 3.11)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=15)


def versions() -> dict[str, str]:
    import importlib.metadata

    found = {"python": platform.python_version()}
    for name in ("torch", "transformers", "verl", "ray", "tensordict", "TransferQueue", "rearank"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "absent"
    return found


def figures(rows: list[dict], *, device: dict[str, Any], doctor_rows: list[dict], versions: dict[str, str],
            runs_s: list[float], resumed_from: int, export_s: float, rerank: dict[str, Any],
            gpu_memory_mib: int | None = None) -> dict[str, Any]:
    """The figures of one run: ``rows`` are verl's per-step metrics (:func:`recipes.checks.cpu.merge_metrics`);
    ``gpu_memory_mib``: the peak of all processes on the GPU (:class:`GpuMemory`)."""
    def column(key: str) -> list[float | None]:
        return [row.get(key) for row in rows]

    def peak(key: str) -> float | None:  # the actor's, as verl logs it each step (the rollout server's is not)
        values = [v for v in column(key) if v is not None]
        return max(values) if values else None

    return {
        "recipe": "recipes/rearank/grpo.yaml through recipes/train.sh (RECIPE=rearank)",
        "device": device,
        "driver": next((r["found"] for r in doctor_rows if r["name"] == "driver"), None),
        "doctor": {r["name"]: r["status"] for r in doctor_rows},
        "versions": versions,
        "steps": [int(v) for v in column("training/global_step")],
        "resumed_from_step": resumed_from,
        "step_s": column("timing_s/step"),
        "generation_s": column("timing_s/gen"),
        "update_actor_s": column("timing_s/update_actor"),
        "pg_loss": column("actor/pg_loss"),
        "kl_loss": column("actor/kl_loss"),
        "grad_norm": column("actor/grad_norm"),
        "score_mean": column("critic/score/mean"),
        "response_length_mean": column("response_length/mean"),
        "peak_memory_allocated_gb": peak("actor/perf/max_memory_allocated_gb"),
        "peak_memory_reserved_gb": peak("actor/perf/max_memory_reserved_gb"),
        "peak_gpu_memory_used_mib": gpu_memory_mib,
        "runs_s": [round(s, 1) for s in runs_s],
        "export_s": round(export_s, 1),
        "rerank": rerank,
        "differs_from_a_cluster_run": list(DIFFERENCES),
    }


def write_figures(path: Path, data: dict[str, Any], overwrite: bool = False) -> Path:
    """``data`` as JSON at ``path``, written beside it and renamed into place; an existing file is kept unless
    ``overwrite``."""
    if path.exists() and not overwrite:
        raise RearankError(f"{path} exists; pass --overwrite to replace it")
    with atomic_write(path) as out:
        json.dump(data, out, indent=1)
        out.write("\n")
    return path


def device_info(device: str) -> dict[str, Any]:
    import torch

    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        return {"kind": "cuda", "name": props.name, "memory_gib": round(props.total_memory / 2**30, 1),
                "cuda": torch.version.cuda}
    return {"kind": "cpu", "name": platform.processor() or platform.machine(), "cores": os.cpu_count()}


def run(assets: Path, out: Path, device: str, steps: int, overwrite: bool) -> Path:
    target = out / "gpu_train.json"
    if target.exists() and not overwrite:
        raise RearankError(f"{target} exists; pass --overwrite to run again")
    folder = out / "run"
    if folder.exists() and any(folder.iterdir()):
        if not overwrite:
            raise RearankError(f"{folder} is not empty; pass --overwrite to start again")
        shutil.rmtree(folder)
    os.environ["REARANK_DATA"] = str(assets / "data")
    doctor_rows = doctor(folder, device)
    with GpuMemory() as memory:
        runs = [train(assets, folder, steps, device), train(assets, folder, steps + 1, device)]
    ckpt = folder / "checkpoints" / PROJECT / EXPERIMENT
    if not (ckpt / f"global_step_{steps + 1}" / "actor").is_dir():
        raise RearankError(f"{ckpt}: no global_step_{steps + 1} after the resumed run")
    rows = merge_metrics(folder)
    check_metrics(rows, folder / "metrics.jsonl", steps + 1)
    export = folder / "export"
    started = time.perf_counter()
    _run([sys.executable, "-m", "recipes.checks.export", str(ckpt), "--output-dir", str(export), "--force"],
         folder / "logs" / "export.log")
    export_s = time.perf_counter() - started
    use = use_export(STAGE, export, folder) + (["-O", "device=cuda"] if device == "cuda" else [])
    use_s = _run(use, folder / "logs" / "rerank.log")
    ranked = (folder / "use" / "run.trec").read_text(encoding="utf-8").splitlines()
    rerank = {"command": "rearank rerank --backend hf --dataset dl19 --max-queries 2" + (
        " -O device=cuda" if device == "cuda" else ""), "queries": len({line.split()[0] for line in ranked}),
        "lines": len(ranked), "seconds": round(use_s, 1)}
    data = figures(rows, device=device_info(device), doctor_rows=doctor_rows, versions=versions(), runs_s=runs,
                   resumed_from=steps, export_s=export_s, rerank=rerank, gpu_memory_mib=memory.peak_mib)
    return write_figures(target, data, overwrite)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assets", type=Path, required=True, help="what `python -m recipes.gpu.carry assets` wrote")
    parser.add_argument("--out", type=Path, required=True, help="where the run and gpu_train.json go")
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                        help="cuda when torch sees a GPU (auto, the default), else cpu")
    parser.add_argument("--steps", type=int, default=3, help="GRPO steps of the first run (3); the resume adds one")
    parser.add_argument("--overwrite", action="store_true", help="replace an earlier run in --out")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps: at least 1")
    device = args.device
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        path = run(args.assets.resolve(), args.out.resolve(), device, args.steps, args.overwrite)
    except RearankError as err:
        print(f"gpu run: {err}", file=sys.stderr)
        return 1
    print(f"gpu run: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
