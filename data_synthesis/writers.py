"""Output files: verl RL parquet (fixed schema), SFT JSONL, stats, all staged and renamed into place together.

Every file is first written under a hidden temporary name in the output folder; only when all of them are
written are they renamed to their final names (``stats.json`` last). A failure removes the temporary files,
so an interrupted run leaves nothing that looks complete.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rearank.errors import RearankError

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
        ("initial_ndcg10", pa.float64()),
        ("ideal_ndcg10", pa.float64()),
        ("split", pa.string()),
        ("index", pa.int64()),
        ("query", pa.string()),
    ])),
])

#: Every file synthesis may write; files of an earlier run that this run does not write are removed.
OUTPUT_NAMES = (
    "train.parquet", "val.parquet", "sft_train.jsonl", "sft_val.jsonl", "stats.md", "stats.json",
)


class StagedOutputs:
    """Temporary paths for an output folder's files, renamed into place together by :meth:`commit`."""

    def __init__(self, output_dir: str | os.PathLike) -> None:
        self.dir = Path(output_dir)
        if self.dir.exists() and not self.dir.is_dir():
            raise RearankError(f"--output-dir {self.dir} exists and is not a folder")
        self.dir.mkdir(parents=True, exist_ok=True)
        self.staged: dict[str, Path] = {}

    def path(self, name: str) -> Path:
        """A fresh temporary path in the output folder that :meth:`commit` will rename to ``name``."""
        tmp = self.dir / f".{name}.{secrets.token_hex(6)}.tmp"
        self.staged[name] = tmp
        return tmp

    def commit(self) -> list[Path]:
        """Rename the staged files (``stats.json`` last) and remove stale outputs of earlier runs."""
        for name in OUTPUT_NAMES:
            if name not in self.staged:
                with contextlib.suppress(FileNotFoundError):
                    (self.dir / name).unlink()
        names = sorted(self.staged, key=lambda n: n == "stats.json")
        for name in names:
            os.replace(self.staged[name], self.dir / name)
        written = [self.dir / name for name in names]
        self.staged = {}
        return written

    def discard(self) -> None:
        """Remove every staged temporary file."""
        for tmp in self.staged.values():
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        self.staged = {}


@contextlib.contextmanager
def staged_outputs(output_dir: str | os.PathLike) -> Iterator[StagedOutputs]:
    """Stage files in ``output_dir``; commit them if the block succeeds, discard them if it raises."""
    outputs = StagedOutputs(output_dir)
    try:
        yield outputs
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
