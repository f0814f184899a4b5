"""The carry: what a bare GPU machine needs beside the project's files to run ``recipes/gpu/run.sh``, as one .tar.xz.

The machine (one H100/H200, Python 3.12, torch 2.11+cu130, transformers, pandas, pyarrow; no Ray, verl, Hydra or
package index, 64 MiB of files at most; ../shared/notes/gpu-carry.md) gets

* ``site/``: Ray (trimmed and stripped), verl and the small packages it and the V1 trainer import, installed from
  cp312 manylinux wheels (:data:`PINS`, the versions this project's CPU environment runs), plus a ``rearank``
  dist-info that carries the project's entry points (its ``rearank`` subcommands and the ``verl.plugins`` one that
  registers the transformers rollout): the project itself is not installed there, only put on ``PYTHONPATH``;
* ``assets/``: the rearank recipe's data (``rl/``, synthesized here from dl21), the warm-started tiny model
  (``model/``, as ``make train-cpu`` makes it) and the dl19 pack the exported model reranks (``data/``).

    python -m recipes.gpu.carry build [--out .carry/gpu-carry.tar.xz] [--overwrite]   # here, with PyPI
    python -m recipes.gpu.carry assets DIR                                            # the assets alone
    python -m recipes.gpu.carry unpack FILE --target DIR                              # there (standard library only)

``build`` prints the archive's size; with the project's files it must stay under the machine's 64 MiB.
"""

from __future__ import annotations

import argparse
import lzma
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / ".carry" / "gpu-carry.tar.xz"
#: What the GPU machine lacks, at the versions this project's CPU environment runs verl with (Ray with its core
#: dependencies, verl 0.9.1 with its V1 trainer's: TransferQueue, Hydra, tensordict, datasets, pydantic, FastAPI),
#: and the two the project's own `rearank rerank` imports.
#: verl is installed without its dependency pins (it declares transformers<5.11; the machine has 5.17).
PINS = (
    "ray==2.60.0", "verl==0.9.1", "TransferQueue==0.1.11", "pyzmq==27.3.0", "msgspec==0.22.0", "cachetools==8.0.2",
    "codetiming==1.4.0", "datasets==5.2.0", "dill==0.4.1", "multiprocess==0.70.19", "hydra-core==1.3.8",
    "omegaconf==2.3.1", "tensordict==0.10.0", "pyvers==0.1.0", "orjson==3.13.0", "torchdata==0.11.0",
    "jsonschema==4.26.0", "jsonschema-specifications==2025.9.1", "referencing==0.37.0", "rpds-py==2026.9.1",
    "pydantic==2.14.4", "pydantic-core==2.50.5", "annotated-types==0.8.0", "typing-inspection==0.4.5",
    "fastapi==0.165.0", "starlette==1.10.0", "uvicorn==0.54.0",
    "opentelemetry-api==1.45.2",  # fastapi 0.165 imports it (the first GPU run stopped there: ModuleNotFoundError)
    "ir-measures==0.4.3", "pytrec-eval-terrier==0.5.11",  # `rearank rerank` scores its run (rearank.measures.ir)
)
#: Released as source only (pure Python): built into wheels here.
SOURCE_PINS = ("antlr4-python3-runtime==4.9.3", "pylatexenc==2.11")
#: pip's target: the GPU machine's interpreter and platform (pip matches each manylinux tag exactly).
PLATFORM = ("--python-version", "3.12", "--implementation", "cp", "--only-binary=:all:",
            *(arg for tag in ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
                              "manylinux2014_x86_64", "manylinux_2_5_x86_64", "manylinux1_x86_64", "any")
              for arg in ("--platform", tag)))
#: Parts of Ray a verl run never imports (its Java jars, the libraries above Ray Core, the dashboard's web client).
RAY_UNUSED = ("jars", "rllib", "tune", "train", "serve", "data", "llm", "workflow", "dashboard/client")
#: Entry-point groups of pyproject.toml the carried dist-info declares.
ENTRY_GROUPS = ("rearank.commands", "verl.plugins")
MARKER = ".carry-unpacked"
#: The GPU machine's packages (one name a line; ``#`` comments): what a carried package may need without carrying it.
MACHINE_PACKAGES = Path(__file__).with_name("machine_packages.txt")
#: Declared requirements no verl run imports: wandb (verl's optional logger), importlib-metadata (tensordict 0.10
#: declares it and imports the standard library's importlib.metadata).
UNUSED_REQUIREMENTS = frozenset({"wandb", "importlib-metadata"})
#: The GPU machine's interpreter, for requirement markers.
MACHINE_ENV = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
               "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
               "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}


class CarryError(Exception):
    """A step failed; the message says which and what to do."""


def _pip(*args: str) -> None:
    cmd = [sys.executable, "-m", "pip", *args]
    print("+ " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, check=False)
    if proc.returncode:
        raise CarryError(f"pip {args[0]} exited with {proc.returncode} (is PyPI reachable? see its output above)")


def download(wheels: Path) -> None:
    """The wheels of :data:`PINS` for the GPU machine, and :data:`SOURCE_PINS` built into wheels, into ``wheels``."""
    _pip("download", "--no-deps", "--quiet", "-d", str(wheels), *PLATFORM, *PINS)
    _pip("wheel", "--no-deps", "--quiet", "-w", str(wheels), *SOURCE_PINS)


def install(wheels: Path, site: Path) -> None:
    _pip("install", "--no-index", "--no-deps", "--no-compile", "--quiet", "--target", str(site), *PLATFORM,
         *map(str, sorted(wheels.glob("*.whl"))))
    shutil.rmtree(site / "bin", ignore_errors=True)  # console scripts with this machine's interpreter in them


def missing_requirements(site: Path, machine: Path = MACHINE_PACKAGES) -> dict[str, list[str]]:
    """The requirements of the packages installed in ``site`` that neither ``site`` nor the machine (``machine``'s
    names) has, but :data:`UNUSED_REQUIREMENTS`: requirement -> the carried packages that declare it."""
    from email.parser import Parser

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    lines = (line.split("#")[0].strip() for line in machine.read_text().splitlines())
    have = {canonicalize_name(line) for line in lines if line} | UNUSED_REQUIREMENTS
    declared = {}
    for meta in site.glob("*.dist-info/METADATA"):
        message = Parser().parsestr(meta.read_text(encoding="utf-8"))
        declared[canonicalize_name(message["Name"])] = message.get_all("Requires-Dist") or []
    have |= set(declared)
    missing: dict[str, list[str]] = {}
    for name, requirements in sorted(declared.items()):
        for text in requirements:
            requirement = Requirement(text)
            if requirement.marker is not None and not requirement.marker.evaluate(MACHINE_ENV):
                continue
            if canonicalize_name(requirement.name) not in have:
                missing.setdefault(canonicalize_name(requirement.name), []).append(name)
    return missing


def trim_ray(site: Path) -> list[str]:
    """Remove :data:`RAY_UNUSED` from ``site/ray``; returns what was removed."""
    removed = []
    for part in RAY_UNUSED:
        path = site / "ray" / part
        if path.is_dir():
            shutil.rmtree(path)
            removed.append(part)
    return removed


def _is_elf(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(4) == b"\x7fELF"


def strip_binaries(site: Path) -> int:
    """``strip`` Ray's programs (``--strip-all``) and extension modules (``--strip-unneeded``); returns the bytes
    saved. Without ``strip`` on PATH nothing changes."""
    if shutil.which("strip") is None:
        print("carry: no `strip` here; Ray's binaries stay as they are (a larger archive)", flush=True)
        return 0
    saved = 0
    for path in sorted((site / "ray").rglob("*")):
        if not path.is_file() or path.is_symlink() or not _is_elf(path):
            continue
        before = path.stat().st_size
        mode = "--strip-unneeded" if path.suffix == ".so" or ".so." in path.name else "--strip-all"
        if subprocess.run(["strip", mode, str(path)], capture_output=True, check=False).returncode == 0:
            saved += before - path.stat().st_size
    return saved


def entry_points_text(pyproject: Path = ROOT / "pyproject.toml") -> str:
    """``entry_points.txt`` for the project's :data:`ENTRY_GROUPS`, as pip would write it."""
    import tomllib

    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    groups = project["entry-points"]
    return "".join(f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in groups[group].items()) + "\n"
                   for group in ENTRY_GROUPS)


def write_dist_info(site: Path, pyproject: Path = ROOT / "pyproject.toml") -> Path:
    """A ``rearank`` dist-info in ``site`` with the project's entry points (the project runs from its checkout)."""
    import tomllib

    version = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"]
    info = site / f"rearank-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: rearank\nVersion: {version}\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(entry_points_text(pyproject), encoding="utf-8")
    return info


def build_assets(target: Path) -> Path:
    """``target/{rl,model,data}``: the rearank recipe's data, its warm-started tiny model, the dl19 pack."""
    from recipes.checks.cpu import synthesize, warm_start
    from recipes.checks.data import shared
    from recipes.checks.table import STAGES

    stage = STAGES["rearank"]
    data = synthesize(stage, target / "rl", target / "logs" / "synth.log")
    warm_start(stage, data, target / "model")
    pack = target / "data" / "msmarco-v1-passage" / "dl19"
    if not pack.is_dir():
        shutil.copytree(shared("msmarco-v1-passage/dl19"), pack)
    shutil.rmtree(target / "logs", ignore_errors=True)
    for lock in target.glob(".*.lock"):  # the synthesis's own lock, done with
        lock.unlink()
    return target


def pack(folder: Path, out: Path, overwrite: bool = False) -> int:
    """``folder``'s contents as ``out`` (.tar.xz, xz -9e), written beside it and renamed into place; its size."""
    if out.exists() and not overwrite:
        raise CarryError(f"{out} exists; pass --overwrite to build it again")
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    os.close(fd)
    try:
        with tarfile.open(tmp, "w:xz", preset=9 | lzma.PRESET_EXTREME) as archive:
            for child in sorted(folder.iterdir()):
                archive.add(child, arcname=child.name)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would keep it from other users of a shared machine
        os.replace(tmp, out)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return out.stat().st_size


def unpack(archive: Path, target: Path) -> Path:
    """``archive`` into ``target`` (modes kept: Ray's programs stay executable); skipped when this very archive (same
    size and time) was unpacked there already, so that a second try on the GPU machine starts at once."""
    if not archive.is_file():
        raise CarryError(f"{archive}: no such carry; build it with `python -m recipes.gpu.carry build`")
    stamp = f"{archive.name} {archive.stat().st_size} {int(archive.stat().st_mtime)}"
    marker = target / MARKER
    if marker.is_file() and marker.read_text(encoding="utf-8") == stamp:
        return target
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "r:*") as tar:
        tar.extractall(target, filter="data")
    marker.write_text(stamp, encoding="utf-8")
    return target


def build(out: Path, overwrite: bool, wheels: Path | None) -> int:
    if out.exists() and not overwrite:
        raise CarryError(f"{out} exists; pass --overwrite to build it again")
    with tempfile.TemporaryDirectory(prefix="gpu-carry-") as scratch:
        stage = Path(scratch) / "carry"
        wheels = wheels or Path(scratch) / "wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        if not any(wheels.glob("*.whl")):
            download(wheels)
        site = stage / "site"
        install(wheels, site)
        missing = missing_requirements(site)
        if missing:
            raise CarryError("the GPU machine lacks what carried packages require: " + "; ".join(
                f"{name} (for {', '.join(by)})" for name, by in missing.items()) + ": add them to PINS")
        removed = trim_ray(site)
        saved = strip_binaries(site)
        write_dist_info(site)
        build_assets(stage / "assets")
        unpacked = sum(p.stat().st_size for p in stage.rglob("*") if p.is_file())
        print(f"carry: Ray without {', '.join(removed)}; strip saved {saved:,} B; {unpacked:,} B unpacked", flush=True)
        return pack(stage, out, overwrite)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split(
                                         "\n\n", 1)[1])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("build", help="download, trim and pack everything (needs PyPI and the shared data)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"the archive (default {DEFAULT_OUT})")
    p.add_argument("--wheels", type=Path, help="a folder of wheels downloaded before (download there if empty)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing archive")
    p = sub.add_parser("assets", help="the data, tiny model and dl19 pack alone, into a folder")
    p.add_argument("target", type=Path)
    p = sub.add_parser("unpack", help="unpack an archive (standard library only)")
    p.add_argument("archive", type=Path)
    p.add_argument("--target", type=Path, required=True, help="the folder to unpack into")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            size = build(args.out.resolve(), args.overwrite, args.wheels)
            print(f"carry: {args.out} {size:,} B ({size / 2**20:.1f} MiB)")
        elif args.command == "assets":
            print(f"carry: assets in {build_assets(args.target.resolve())}")
        else:
            print(f"carry: unpacked into {unpack(args.archive, args.target)}")
    except CarryError as err:
        print(f"carry: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
