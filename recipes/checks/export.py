"""Export a verl FSDP actor checkpoint to a Hugging Face folder that ``rearank rerank --model DIR`` loads.

    python -m recipes.checks.export CHECKPOINT --output-dir DIR [--step N] [--force]

CHECKPOINT is a run folder (``checkpoints/rearank/<experiment>``; the latest step is taken from verl's
``latest_checkpointed_iteration.txt`` unless ``--step``), a ``global_step_N`` folder or its ``actor`` folder.
The merge is verl's own (``python -m verl.model_merger merge --backend fsdp``), written into a temporary
folder beside DIR and renamed into place only when the model, config and tokenizer (with chat template) are
all there, so an interrupted export never looks complete.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rearank.errors import MissingDataError, RearankError
from rearank.io.files import atomic_folder
from rearank.io.outputs import check_replaced_folder

TRACKER = "latest_checkpointed_iteration.txt"


def actor_folder(checkpoint: Path, step: int | None = None) -> Path:
    """The ``global_step_N/actor`` folder that ``checkpoint`` (run, step or actor folder) designates."""
    if (checkpoint / "fsdp_config.json").is_file():
        return checkpoint
    if (checkpoint / "actor").is_dir():
        return actor_folder(checkpoint / "actor")
    if step is None:
        tracker = checkpoint / TRACKER
        if not tracker.is_file():
            raise MissingDataError(f"{checkpoint}: no {TRACKER} and no global_step_N/actor folder; pass the run folder "
                                   "that `trainer.default_local_dir` points to, or --step N")
        try:
            step = int(tracker.read_text().strip())
        except ValueError:
            raise RearankError(f"{tracker}: expected a step number, got {tracker.read_text().strip()[:40]!r}") from None
    found = checkpoint / f"global_step_{step}" / "actor"
    if not (found / "fsdp_config.json").is_file():
        raise MissingDataError(f"{found}: no verl FSDP actor checkpoint (fsdp_config.json) there")
    return found


def merge(actor: Path, target: Path) -> None:
    """Run verl's FSDP model merger: sharded actor state + ``actor/huggingface`` config -> HF model in ``target``."""
    if not (actor / "huggingface" / "config.json").is_file():  # checked before verl loads (seconds)
        raise MissingDataError(f"{actor / 'huggingface'}: no config.json; verl writes it with every checkpoint")
    from verl.model_merger.base_model_merger import ModelMergerConfig
    from verl.model_merger.fsdp_model_merger import FSDPModelMerger
    config = ModelMergerConfig(operation="merge", backend="fsdp", local_dir=str(actor), target_dir=str(target),
                               hf_model_config_path=str(actor / "huggingface"))
    merger = FSDPModelMerger(config)
    merger.merge_and_save()
    merger.cleanup()


def check_hf_folder(folder: Path) -> None:
    """Raise unless ``folder`` has weights, a config and a tokenizer with a chat template (what rerank needs)."""
    if not list(folder.glob("*.safetensors")) and not list(folder.glob("*.bin")):
        raise RearankError(f"{folder}: the merge wrote no model weights")
    from transformers import AutoConfig, AutoTokenizer  # after the cheap check: it takes seconds to load
    AutoConfig.from_pretrained(folder)
    if not getattr(AutoTokenizer.from_pretrained(folder), "chat_template", None):
        raise RearankError(f"{folder}: the tokenizer has no chat template; the checkpoint's huggingface/ folder lacks it")


def export(checkpoint: Path, output: Path, step: int | None = None, force: bool = False) -> Path:
    """Merge the actor of ``checkpoint`` into the Hugging Face folder ``output``; return the actor folder used."""
    actor = actor_folder(checkpoint, step)
    check_replaced_folder("--output-dir", output, {"CHECKPOINT": checkpoint, "its actor folder": actor})
    if output.exists() and not force:
        raise RearankError(f"{output} exists; remove it or pass --force to replace it")
    with atomic_folder(output, replace=True) as tmp:
        print(f"+ python -m verl.model_merger merge --backend fsdp --local_dir {actor} --target_dir {tmp}", flush=True)
        merge(actor, tmp)
        check_hf_folder(tmp)
    return actor


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("checkpoint", type=Path, help="run folder, global_step_N folder or its actor folder")
    parser.add_argument("--output-dir", type=Path, required=True, metavar="DIR", help="Hugging Face folder to write")
    parser.add_argument("--step", type=int, help="global step to export (default: the latest checkpoint)")
    parser.add_argument("--force", action="store_true", help="replace --output-dir if it exists")
    args = parser.parse_args(argv)
    try:
        actor = export(args.checkpoint, args.output_dir, args.step, args.force)
    except RearankError as err:
        print(f"export: {err}", file=sys.stderr)
        return 2
    print(f"exported {actor} -> {args.output_dir}\nuse it: rearank rerank --model {args.output_dir} --backend hf|vllm ...")
    return 0


if __name__ == "__main__":
    sys.exit(main())
