"""This node's GPU stack as a training run needs it: the NVIDIA driver against the CUDA build of the installed torch,
NCCL, the GPUs against a recipe's ``trainer.n_gpus_per_node``, and the attention kernel (flash-attn or SDPA).

:func:`read` takes the readings (``nvidia-smi`` on ``PATH``, else ``/proc/driver/nvidia/version``; torch's own
build numbers); the ``check_*`` functions judge a :class:`Node` and return a :class:`Finding` (status ``ok``,
``missing`` -- nothing to check on this machine, e.g. no GPU -- or ``FAIL``). ``rearank doctor`` and
``make train-preflight`` print them, one line each. Tests hand in a :class:`Node` of their own, or put a fake
``nvidia-smi`` on ``PATH``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

OK, MISSING, FAIL = "ok", "missing", "FAIL"
PROC_VERSION = Path("/proc/driver/nvidia/version")

#: The oldest Linux x86_64 driver each CUDA toolkit release needs: NVIDIA's CUDA Toolkit Release Notes, Table 3
#: "CUDA Toolkit and Corresponding Driver Versions", "Toolkit Driver Version" column, GA releases
#: (https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html#id5). An unlisted minor release of a listed
#: major takes the nearest older one's minimum (CUDA 13.1 and 13.2 keep 13.0's 580 series). Minor-version
#: compatibility can run some 12.x code on an older 12.x driver, but not everything (no PTX JIT): the check asks for
#: the toolkit's own minimum.
MIN_DRIVER = {
    (11, 8): "520.61.05", (12, 0): "525.60.13", (12, 1): "530.30.02", (12, 2): "535.54.03", (12, 3): "545.23.06",
    (12, 4): "550.54.14", (12, 5): "555.42.02", (12, 6): "560.28.03", (12, 8): "570.26", (12, 9): "575.51.03",
    (13, 0): "580.65.06",
}


class Finding(NamedTuple):
    """A check's status, what was found, and what to do when it is not ok."""

    status: str
    found: str
    todo: str = ""


@dataclass(frozen=True)
class Node:
    """The readings: ``driver`` (None: no NVIDIA driver), ``gpus`` (names from nvidia-smi; empty: none or no
    nvidia-smi), ``torch_cuda`` (``torch.version.cuda``; None: a CPU build or no torch), ``nccl`` (its version;
    None: absent) and ``flash_attn`` (its version, ``"error: ..."`` when installed but it does not import, None
    when not installed)."""

    driver: str | None
    gpus: tuple[str, ...]
    torch_cuda: str | None
    nccl: str | None
    flash_attn: str | None


def _numbers(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


def read_nvidia_smi() -> tuple[str | None, tuple[str, ...]]:
    """(driver version, GPU names) from ``nvidia-smi``; (None, ()) without it or when it fails."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None, ()
    try:
        out = subprocess.run([exe, "--query-gpu=driver_version,name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None, ()
    rows = [[cell.strip() for cell in line.split(",", 1)] for line in out.splitlines() if line.strip()]
    rows = [row for row in rows if len(row) == 2 and _numbers(row[0])]
    return (rows[0][0] if rows else None), tuple(name for _, name in rows)


def read_proc_driver(path: Path | None = None) -> str | None:
    """The kernel module's version from ``/proc/driver/nvidia/version`` ("... Kernel Module  580.95.05 ...")."""
    try:
        text = (path or PROC_VERSION).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    found = re.search(r"Kernel Module(?: for [\w-]+)?\s+(\d+(?:\.\d+)+)", text)
    return found.group(1) if found else None


def read_torch() -> tuple[str | None, str | None]:
    """(torch's CUDA build, NCCL's version) without starting CUDA; (None, None) without torch."""
    if importlib.util.find_spec("torch") is None:
        return None, None
    import torch

    nccl = None
    if torch.version.cuda and torch.distributed.is_available() and torch.distributed.is_nccl_available():
        version = torch.cuda.nccl.version()
        nccl = ".".join(map(str, version)) if isinstance(version, tuple) else str(version)
    return torch.version.cuda, nccl


def read_flash_attn() -> str | None:
    try:
        version = importlib.metadata.version("flash-attn")
    except importlib.metadata.PackageNotFoundError:
        return None
    try:
        import flash_attn  # noqa: F401
    except Exception as err:  # noqa: BLE001 -- a wheel built for another torch fails with OSError or ImportError
        return f"error: flash-attn {version}: {type(err).__name__}: {' '.join(str(err).split())}"[:200]
    return version


def read() -> Node:
    """This node's readings."""
    driver, gpus = read_nvidia_smi()
    torch_cuda, nccl = read_torch()
    return Node(driver or read_proc_driver(), gpus, torch_cuda, nccl, read_flash_attn())


def min_driver(cuda: str) -> str | None:
    """The oldest driver for a CUDA release (:data:`MIN_DRIVER`); None for a major release the table lacks."""
    wanted = _numbers(cuda)[:2]
    listed = [key for key in MIN_DRIVER if key[0] == wanted[0] and key <= wanted]
    return MIN_DRIVER[max(listed)] if listed else None


def check_driver(node: Node) -> Finding:
    if node.driver is None:
        return Finding(MISSING, "no NVIDIA driver on this machine (no nvidia-smi, no /proc/driver/nvidia/version)",
                       "a CPU machine: run this on a GPU node before training there")
    if node.torch_cuda is None:
        return Finding(MISSING, f"driver {node.driver}; torch here is a CPU build (or absent)",
                       "install the GPU environment (make setup-gpu) and run this again")
    needed = min_driver(node.torch_cuda)
    if needed is None:
        return Finding(FAIL, f"driver {node.driver}; torch built for CUDA {node.torch_cuda}, which this check does "
                       "not know", "compare with NVIDIA's CUDA Toolkit release notes, Table 3, and update "
                       "rearank.machine.node.MIN_DRIVER")
    found = f"driver {node.driver}; torch built for CUDA {node.torch_cuda} needs >= {needed}"
    if _numbers(node.driver) < _numbers(needed):
        return Finding(FAIL, found, f"install an NVIDIA driver >= {needed}, or a torch built for an older CUDA that "
                       f"driver {node.driver} runs (e.g. pip install torch --index-url "
                       "https://download.pytorch.org/whl/cu126 for a 560-series driver)")
    return Finding(OK, found)


def check_nccl(node: Node) -> Finding:
    if node.torch_cuda is None:
        return Finding(MISSING, "no NCCL: torch here is a CPU build (or absent)",
                       "multi-GPU training needs a CUDA build of torch (make setup-gpu)")
    if node.nccl is None:
        return Finding(FAIL, f"torch built for CUDA {node.torch_cuda} without NCCL",
                       "install a torch wheel with NCCL (the PyPI and download.pytorch.org CUDA wheels have it)")
    return Finding(OK, f"NCCL {node.nccl}")


def check_gpus(node: Node, per_node: int | None = None) -> Finding:
    """The node's GPUs, against ``per_node`` (a recipe's ``trainer.n_gpus_per_node``) when given."""
    want = f"; the recipe wants {per_node} per node" if per_node else ""
    if not node.gpus:
        return Finding(MISSING, f"no GPU on this machine{want}", "a CPU machine: run this on a GPU node "
                       "(nvidia-smi lists its GPUs)")
    names = ", ".join(sorted(set(node.gpus)))
    found = f"{len(node.gpus)} x {names}{want}"
    if per_node and len(node.gpus) < per_node:
        return Finding(FAIL, found, f"set trainer.n_gpus_per_node={len(node.gpus)} (GPUS_PER_NODE for the launcher) "
                       f"or book nodes with {per_node} GPUs")
    return Finding(OK, found)


def check_attention(node: Node) -> Finding:
    if node.flash_attn is None:
        return Finding(OK, "sdpa: flash-attn is not installed (recipes/train.sh picks sdpa, without padding removal)")
    if node.flash_attn.startswith("error: "):
        return Finding(FAIL, node.flash_attn.removeprefix("error: "), "reinstall flash-attn for this torch, or "
                       "uninstall it (recipes/train.sh then uses sdpa); every node must agree (ATTN_IMPL)")
    return Finding(OK, f"flash_attention_2: flash-attn {node.flash_attn} imports")
