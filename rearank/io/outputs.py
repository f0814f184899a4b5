"""The output guard: an output must not be an input or another output, and one process writes it at a time."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from rearank.errors import RearankError
from rearank.io.files import PathLike


def _same(a: Path, b: Path) -> bool:
    """Whether two paths name one file (through links and ``..``), existing or not."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist yet
        return a.resolve() == b.resolve()


def check_outputs(inputs: Mapping[str, PathLike | None], outputs: Mapping[str, PathLike | None]) -> None:
    """Refuse an output that is one of the inputs, or that another output also names.

    Keys are the option names shown to the user (``--run``, ``--traces``); ``None`` values are ignored.
    """
    outs = [(name, Path(path)) for name, path in outputs.items() if path is not None]
    ins = [(name, Path(path)) for name, path in inputs.items() if path is not None]
    for i, (name, path) in enumerate(outs):
        for in_name, in_path in ins:
            if _same(path, in_path):
                raise RearankError(f"{name} {path} is the input {in_name}; writing it would destroy the input. "
                                   "Choose another output file")
        for other_name, other in outs[i + 1:]:
            if _same(path, other):
                raise RearankError(f"{name} and {other_name} are the same file ({path}); give them different names")


def lock_path(path: PathLike) -> Path:
    """The lock file that guards ``path``: ``.<name>.lock`` beside it (left in place; it holds no data)."""
    target = Path(path)
    return target.with_name(f".{target.name}.lock")


@contextlib.contextmanager
def exclusive(path: PathLike) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (a file or a folder) for the block; refuse if another process holds it."""
    lock = lock_path(path)
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise RearankError(f"{path}: cannot write here ({err.strerror or err})") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RearankError(f"{path}: another process is writing it (lock {lock} is held); wait for it to "
                               "finish or choose another output") from None
        yield
    finally:
        os.close(fd)  # closing releases the lock
