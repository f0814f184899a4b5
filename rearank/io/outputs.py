"""The output guard: an output must not be an input or another output, and one process writes it at a time.

Every face uses :func:`check_outputs`. A command declares which of its flags read files and which write them
(:func:`reads`, :func:`writes`); ``rearank.cli.build_parser`` makes every command check those flags
(:func:`guard_commands`) before it runs, so a new flag marked as an input is guarded with no more code.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

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

    Keys are the option names shown to the user (``--run``, ``--traces``); a value may be a path or a list of
    paths. ``None`` values, and inputs that are no file or folder (a template's name), are ignored.
    """
    outs = [(name, Path(path)) for name, path in _pairs(outputs)]
    ins = [(name, Path(path)) for name, path in _pairs(inputs) if os.path.exists(path)]
    for i, (name, path) in enumerate(outs):
        for in_name, in_path in ins:
            if _same(path, in_path):
                raise RearankError(f"{name} {path} is the input {in_name}; writing it would destroy the input. "
                                   "Choose another output file")
        for other_name, other in outs[i + 1:]:
            if _same(path, other):
                raise RearankError(f"{name} and {other_name} are the same file ({path}); give them different names")


def check_replaced_folder(name: str, folder: PathLike, inputs: Mapping[str, PathLike | None]) -> None:
    """Refuse a folder an output replaces whole that is one of ``inputs`` or holds one (through links too)."""
    target = Path(folder).resolve()
    for in_name, path in _pairs(inputs):
        if Path(path).resolve().is_relative_to(target):
            raise RearankError(f"{name} {folder} holds the input {in_name} ({path}); replacing it would destroy the "
                               "input. Choose another folder")


def _pairs(paths: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """``(name, path)`` for each path of ``paths``, a list value giving one pair an item."""
    return [(name, path) for name, value in paths.items()
            for path in (value if isinstance(value, (list, tuple)) else [value]) if path is not None and path != ""]


#: The attribute an argparse action carries when its flag names files the command reads or writes.
ROLE = "rearank_path_role"
INPUT, OUTPUT = "input", "output"


def reads(action: argparse.Action) -> argparse.Action:
    """Mark ``action`` (``parser.add_argument(...)``'s result) as naming files or folders the command reads."""
    setattr(action, ROLE, INPUT)
    return action


def writes(action: argparse.Action) -> argparse.Action:
    """Mark ``action`` as naming a file or folder the command writes."""
    setattr(action, ROLE, OUTPUT)
    return action


def flag_name(action: argparse.Action) -> str:
    """How the user spells the flag: its first option string, or a positional's metavar."""
    return action.option_strings[0] if action.option_strings else str(action.metavar or action.dest)


def flag_paths(actions: Iterable[argparse.Action], args: argparse.Namespace, role: str) -> dict[str, Any]:
    """Flag name -> value (a path, a list of them, or None) of the ``actions`` marked ``role``."""
    return {flag_name(a): getattr(args, a.dest, None) for a in actions if getattr(a, ROLE, None) == role}


def check_flags(actions: Iterable[argparse.Action], args: argparse.Namespace) -> None:
    """Refuse ``args`` whose output flags name one of the files of its input flags (:func:`check_outputs`)."""
    actions = list(actions)
    check_outputs(flag_paths(actions, args, INPUT), flag_paths(actions, args, OUTPUT))


class _Guarded:
    """A command's ``func`` that checks its path flags (:func:`check_flags`) before it runs."""

    def __init__(self, func: Callable[[argparse.Namespace], Any], actions: list[argparse.Action]) -> None:
        self.func, self.actions = func, actions

    def __call__(self, args: argparse.Namespace) -> Any:
        check_flags(self.actions, args)
        return self.func(args)


def guard_commands(parser: argparse.ArgumentParser, inherited: tuple[argparse.Action, ...] = ()) -> None:
    """Make the ``func`` of ``parser`` and of each of its subcommands check the path flags of the parsers on its
    path first, so no command writes over one of its inputs."""
    actions = (*inherited, *(a for a in parser._actions if getattr(a, ROLE, None)))
    func = parser._defaults.get("func")
    if func is not None and not isinstance(func, _Guarded):
        parser.set_defaults(func=_Guarded(func, list(actions)))
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # an alias names the same parser
                guard_commands(sub, actions)


def lock_path(path: PathLike) -> Path:
    """The lock file that guards ``path``: ``.<name>.lock`` beside it while a process writes ``path``."""
    target = Path(path)
    return target.with_name(f".{target.name}.lock")


#: How many times :func:`exclusive` opens the lock file again when the one it locked was removed meanwhile.
_LOCK_TRIES = 10


@contextlib.contextmanager
def exclusive(path: PathLike) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (a file or a folder) for the block; refuse if another process holds it.

    The lock file is removed when the block ends (by its holder, while it still holds it), so none is left beside a
    finished output; a process that locked a file just removed finds it is no longer the one at the path and tries
    again, so two processes never both hold the lock."""
    lock = lock_path(path)
    for _ in range(_LOCK_TRIES):
        fd = _open_lock(path, lock)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RearankError(f"{path}: another process is writing it (lock {lock} is held); wait for it to "
                               "finish or choose another output") from None
        if _is_at(fd, lock):
            break
        os.close(fd)  # the holder before us removed it after we opened it: lock the file now at the path
    else:
        raise RearankError(f"{path}: could not take the lock {lock} (other processes keep replacing it)")
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            lock.unlink()
        os.close(fd)  # closing releases the lock


def _open_lock(path: PathLike, lock: Path) -> int:
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        return os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise RearankError(f"{path}: cannot write here ({err.strerror or err})") from None


def _is_at(fd: int, lock: Path) -> bool:
    """Whether the open file ``fd`` is still the file at ``lock`` (not removed or replaced)."""
    try:
        here = os.stat(lock)
    except OSError:
        return False
    mine = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (mine.st_dev, mine.st_ino)
