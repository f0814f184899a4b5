"""Output files: verl RL parquet (fixed schema), SFT JSONL, stats; replaced as one unit with a manifest last.

Every file is first written into a hidden staging folder inside the output folder (``.synth-staging``). When
all are written, ``manifest.json`` (each file's size and SHA-256) is written there: that is the commit point.
Then the earlier outputs' manifest is removed, the staged files are renamed into place, stale outputs of an
earlier run are removed, and the new manifest is renamed in last. A run killed before the commit point leaves
the earlier outputs and a staging folder the next run deletes; one killed after it is finished by the next
run (:func:`recover`), so the folder holds the earlier set or the new one, never a mix, and
``manifest.json`` always describes what is there (:func:`verify`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rearank.errors import RearankError
from rearank.io.files import atomic_write, fsync_file
from rearank.io.outputs import exclusive

#: The verl RL row: chat-message prompt, rule reward with a JSON ground truth, and per-set metadata.
RL_SCHEMA = pa.schema([
    ("data_source", pa.string()),
    ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
    ("ability", pa.string()),
    ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
    ("extra_info", pa.struct([
        ("qid", pa.string()),
        ("set_index", pa.int64()),
        ("docids", pa.list_(pa.string())),
        ("set_ndcg10", pa.float64()),
        ("pool_ndcg10", pa.float64()),
        ("split", pa.string()),
        ("index", pa.int64()),
        ("query", pa.string()),
    ])),
])

#: Every file synthesis may write; files of an earlier run that this run does not write are removed.
OUTPUT_NAMES = (
    "train.parquet", "val.parquet", "sft_train.jsonl", "sft_val.jsonl", "sft_train.parquet", "sft_val.parquet",
    "stats.md", "stats.json",
)
MANIFEST = "manifest.json"
STAGING = ".synth-staging"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def recover(output_dir: str | os.PathLike) -> None:
    """Finish or undo an interrupted replacement in ``output_dir`` (a no-op when none was interrupted)."""
    folder = Path(output_dir)
    staging = folder / STAGING
    if not staging.is_dir():
        return
    if (staging / MANIFEST).is_file():
        _roll_forward(folder)
    else:
        shutil.rmtree(staging)


def _roll_forward(folder: Path) -> None:
    """Move a committed staging folder's files into place (idempotent: a second call finishes a killed first)."""
    staging = folder / STAGING
    files = json.loads((staging / MANIFEST).read_text(encoding="utf-8"))["files"]
    with contextlib.suppress(FileNotFoundError):
        (folder / MANIFEST).unlink()  # from here on no manifest claims the earlier set
    for name in OUTPUT_NAMES:
        if name not in files:
            with contextlib.suppress(FileNotFoundError):
                (folder / name).unlink()
    for name in files:
        if (staging / name).exists():
            os.replace(staging / name, folder / name)
    os.replace(staging / MANIFEST, folder / MANIFEST)
    shutil.rmtree(staging)


def verify(output_dir: str | os.PathLike) -> dict[str, Any]:
    """The manifest of ``output_dir`` after checking every file it lists; RearankError naming a mismatch."""
    folder = Path(output_dir)
    path = folder / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise RearankError(f"{path}: missing or unreadable ({err}); the outputs in {folder} are not a finished set")
    for name, meta in manifest["files"].items():
        target = folder / name
        if not target.is_file() or target.stat().st_size != meta["bytes"] or _sha256(target) != meta["sha256"]:
            raise RearankError(f"{target} does not match {path}; rerun `rearank synth --overwrite`")
    return manifest


def check_output_dir(output_dir: str | os.PathLike, overwrite: bool) -> None:
    """Finish an interrupted replacement, then refuse a folder holding earlier outputs unless ``overwrite``."""
    folder = Path(output_dir)
    if not folder.is_dir():
        return
    recover(folder)
    earlier = [name for name in (*OUTPUT_NAMES, MANIFEST) if (folder / name).exists()]
    if earlier and not overwrite:
        raise RearankError(f"{folder} already holds synthesis outputs ({', '.join(earlier)}); pass --overwrite "
                           "to replace them, or choose another --output-dir")


class StagedOutputs:
    """Paths in a staging folder for an output folder's files, replaced into place as one unit by :meth:`commit`.

    Earlier outputs in the folder are refused unless ``overwrite``.
    """

    def __init__(self, output_dir: str | os.PathLike, overwrite: bool = False) -> None:
        self.dir = Path(output_dir)
        if self.dir.exists() and not self.dir.is_dir():
            raise RearankError(f"--output-dir {self.dir} exists and is not a folder")
        self.dir.mkdir(parents=True, exist_ok=True)
        check_output_dir(self.dir, overwrite)
        self.staging = self.dir / STAGING
        self.staging.mkdir()
        self.staged: dict[str, Path] = {}

    def path(self, name: str) -> Path:
        """The staging path that :meth:`commit` will move to ``name`` in the output folder."""
        self.staged[name] = self.staging / name
        return self.staged[name]

    def commit(self) -> list[Path]:
        """Write the manifest (the commit point), then move every file into place, the manifest last."""
        files = {}
        for name, path in self.staged.items():
            fsync_file(path)
            files[name] = {"bytes": path.stat().st_size, "sha256": _sha256(path)}
        with atomic_write(self.staging / MANIFEST, fsync=True) as handle:
            handle.write(json.dumps({"files": files}, indent=1) + "\n")
        _roll_forward(self.dir)
        written = [self.dir / name for name in (*self.staged, MANIFEST)]
        self.staged = {}
        return written

    def discard(self) -> None:
        """Remove the staging folder and everything in it."""
        shutil.rmtree(self.staging, ignore_errors=True)
        self.staged = {}


@contextlib.contextmanager
def staged_outputs(output_dir: str | os.PathLike, overwrite: bool = False) -> Iterator[StagedOutputs]:
    """Stage files for ``output_dir`` (holding its lock); commit them if the block succeeds, discard them if not."""
    with exclusive(output_dir):
        outputs = StagedOutputs(output_dir, overwrite)
        try:
            yield outputs
        except OSError as err:  # a full disk, a quota: earlier outputs stay as they were
            outputs.discard()
            raise RearankError(f"{outputs.dir}: cannot write the outputs ({err.strerror or err}); earlier outputs "
                               "in it are unchanged") from None
        except BaseException:
            outputs.discard()
            raise
        outputs.commit()


def write_parquet(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write RL rows with :data:`RL_SCHEMA` (an empty split still gets a valid file with the schema)."""
    pq.write_table(pa.Table.from_pylist(rows, schema=RL_SCHEMA), path)


def write_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """Write one JSON object per line (UTF-8, non-ASCII kept)."""
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        handle.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def write_text(path: Path, text: str) -> None:
    """Write a UTF-8 text file."""
    path.write_text(text, encoding="utf-8", newline="\n")
