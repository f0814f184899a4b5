"""The models the checks train: the embedded SmolLM2-135M-Instruct, a tiny random model of its architecture, or a
folder given by ``--model``; and the one place they and their tokenizers are loaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rearank.cache import cache_root
from rearank.errors import RearankError
from rearank.io.files import atomic_folder

TINY_FOLDER = "smollm2-arch-tiny-random"
#: Size of the random model: SmolLM2's architecture (Llama) and tokenizer, 2 layers of width 64 (3.2M parameters).
TINY_SIZE = {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
             "num_key_value_heads": 2, "head_dim": 16}


def load_tokenizer(folder: Path, **options: Any) -> Any:
    """The tokenizer of a Hugging Face folder (``options``: e.g. ``padding_side``)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder, **options)


def load_model(folder: Path) -> Any:
    """A causal LM from a Hugging Face folder, in float32 (CPU training)."""
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)


def embedded_policy(seed: int = 0) -> tuple[Any, Any]:
    """The embedded SmolLM2-135M-Instruct to train with TRL (torch seeded first) and its left-padding tokenizer."""
    import torch

    from rearank.backends.models import embedded_model_path

    torch.manual_seed(seed)
    folder = embedded_model_path()
    return load_model(folder), load_tokenizer(folder, padding_side="left")


def tiny_base(cache: Path | None = None, **size: int) -> Path:
    """A randomly initialised model of SmolLM2-135M-Instruct's architecture (:data:`TINY_SIZE`, 3.2M parameters)
    with its tokenizer and chat template, made once (seeded) in ``<cache>/models``. ``size``: values that replace
    :data:`TINY_SIZE`'s (e.g. ``head_dim=32`` for vLLM's CPU attention), a folder of their own."""
    from rearank.backends.models import embedded_model_path

    suffix = "".join(f"-{key}{value}" for key, value in sorted(size.items()))
    target = (cache or cache_root()) / "models" / f"{TINY_FOLDER}{suffix}"
    if (target / "config.json").is_file():
        return target
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

    base = embedded_model_path()
    config = AutoConfig.from_pretrained(base)
    for key, value in {**TINY_SIZE, **size}.items():
        setattr(config, key, value)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with atomic_folder(target) as tmp:
        model.save_pretrained(tmp)
        load_tokenizer(base).save_pretrained(tmp)
        GenerationConfig.from_pretrained(base).save_pretrained(tmp)
    return target


def model_path(model: str) -> Path | None:
    """``--model``: None for ``tiny`` (each stage warm-starts its own), else a Hugging Face folder."""
    if model == "tiny":
        return None
    if model == "smollm2":
        from rearank.backends.models import embedded_model_path

        return embedded_model_path()
    path = Path(model).resolve()
    if not (path / "config.json").is_file():
        raise RearankError(f"--model {model}: not 'tiny', 'smollm2' or a Hugging Face folder with config.json")
    return path
