"""``TRAIN_DEVICE=cpu recipes/train.sh``: the CPU configuration of ``make train-cpu`` (:mod:`recipes.checks.cpu`)
for one recipe file, less what train.sh sets itself, merged with the user's overrides (theirs win). train.sh reads
the result, NUL-separated, from stdout.

    python -m recipes.checks.cpu_launch FILE --data DIR [--nnodes N] [--joins-cluster] [--from-sft] [-- OVERRIDE ...]

``FILE`` is a recipe file under recipes/ (``rearank/grpo``, ``grouprank/sft``, ...); the model is the tiny random
one of :func:`~recipes.checks.models.tiny_base` (an SFT stage fine-tunes it; ``--from-sft``: GRPO starts from the
SFT stage's folder, which train.sh names, so no model is set).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rearank.errors import RearankError
from recipes.checks.cpu import STEPS, cpu_overrides, fitted_prompt_tokens, merge_overrides, sft_cpu_overrides
from recipes.checks.models import tiny_base
from recipes.checks.table import STAGES, Stage

#: SFT steps of a CPU run: enough to leave the huggingface/ folder GRPO starts from.
SFT_STEPS = 1
#: For every Ray worker of a CPU run with the tiny model: its matrices run fastest on one thread a process.
TINY_ENV = {"OMP_NUM_THREADS": "1", "REARANK_ROLLOUT_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


def stage_of(file: str) -> Stage:
    """The table's stage of a recipe file; a ``_debug`` variant or an ``sft`` file maps to its folder's GRPO."""
    folder, name = file.split("/", 1) if "/" in file else ("", file)
    recipe = f"{folder}/grpo" if name == "sft" else file.removesuffix("_debug")
    for stage in STAGES.values():
        if stage.recipe == recipe:
            return stage
    raise RearankError(f"TRAIN_DEVICE=cpu: no CPU configuration for recipes/{file}.yaml; the verl recipes of "
                       f"recipes/checks/table.py have one ({', '.join(sorted(s.recipe for s in STAGES.values()))})")


def launch_overrides(file: str, data: Path, nnodes: int = 1, joins_cluster: bool = False, from_sft: bool = False,
                     user: list[str] | None = None) -> list[str]:
    """The CPU overrides of ``file`` (data in ``data``, for the prompt length) merged with ``user``'s."""
    stage, model = stage_of(file), tiny_base()
    if file.endswith("/sft"):
        return merge_overrides(sft_cpu_overrides(model, SFT_STEPS), user or [])
    has_data = (data / "train.parquet").is_file() and (data / "val.parquet").is_file()
    prompt_tokens = fitted_prompt_tokens(stage, data, model) if has_data else None
    own = cpu_overrides(stage, STEPS, nnodes, joins_cluster, TINY_ENV, prompt_tokens)
    if not from_sft:
        own.append(f"actor_rollout_ref.model.path={model}")
    return merge_overrides(own, user or [])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", help="recipe file under recipes/, without .yaml (rearank/grpo, grouprank/sft, ...)")
    parser.add_argument("--data", type=Path, required=True, help="the stage's data folder")
    parser.add_argument("--nnodes", type=int, default=1, help="nodes (one training process each)")
    parser.add_argument("--joins-cluster", action="store_true", help="Ray is running (RAY_ADDRESS): declare no "
                        "Ray resources")
    parser.add_argument("--from-sft", action="store_true", help="GRPO starts from the SFT stage's folder")
    argv = sys.argv[1:] if argv is None else argv
    user = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    try:
        words = launch_overrides(args.file, args.data, args.nnodes, args.joins_cluster, args.from_sft, user)
    except RearankError as err:
        print(f"train.sh: {err}", file=sys.stderr)
        return 2
    sys.stdout.write("".join(f"{word}\0" for word in words))
    return 0


if __name__ == "__main__":
    sys.exit(main())
