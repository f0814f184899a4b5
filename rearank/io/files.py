"""Shared file plumbing for the readers and writers: gzip by suffix, numbered lines, atomic writes.

The atomic writers are the only write-then-rename code in the tree: :func:`atomic_write` (a text handle),
:func:`atomic_path` (a temporary path for writers that take a file name: parquet, figures, copies) and
:func:`atomic_folder` (a folder built in full, then renamed into place).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, TypeVar

from rearank.errors import FormatError, MissingDataError, RearankError

PathLike = str | os.PathLike

log = logging.getLogger("rearank.io")
V = TypeVar("V")


def is_gzip(path: PathLike) -> bool:
    """True when the file name ends in ``.gz`` (the only switch for compression)."""
    return str(path).endswith(".gz")


def open_input(path: PathLike) -> IO[bytes]:
    """Open an input file for reading bytes (gzip by suffix): the one place where inputs are opened.

    A missing file raises :class:`MissingDataError`, a folder or an unreadable file a one-line
    :class:`RearankError` naming it (never an OS traceback).
    """
    try:
        return gzip.open(path, "rb") if is_gzip(path) else open(path, "rb")
    except FileNotFoundError:
        raise MissingDataError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise FormatError(path, None, "is a folder, expected a file") from None
    except OSError as err:
        raise RearankError(f"{path}: cannot read ({err.strerror or err})") from None


def read_text(path: PathLike) -> str:
    """The whole UTF-8 text of an input file (``.gz`` transparent), a leading byte-order mark removed."""
    return "".join(line + "\n" for _, line in iter_lines(path))


def iter_lines(path: PathLike) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` (1-based, newline stripped) of a UTF-8 text file, ``.gz`` transparent.

    Undecodable bytes or a corrupt gzip stream raise :class:`FormatError` naming the line.
    """
    number = 0
    with open_input(path) as handle:
        while True:
            try:
                block = handle.readlines(_BLOCK_BYTES)  # whole lines, about a megabyte
            except (OSError, EOFError) as err:  # gzip.BadGzipFile is an OSError
                raise FormatError(path, number + 1, f"cannot read compressed data ({err})") from None
            if not block:
                return
            for line in _decode_block(block, path, number):
                number += 1
                if number == 1 and line.startswith(_BOM):  # Windows editors start UTF-8 files with one
                    line = line[1:]
                yield number, line.rstrip("\r")


_BLOCK_BYTES = 1 << 20
_BOM = "\ufeff"


def _decode_block(block: list[bytes], path: PathLike, before: int) -> list[str]:
    """Decode whole lines at once; on bad UTF-8, find the line to name it."""
    try:
        text = b"".join(block).decode("utf-8")
    except UnicodeDecodeError:
        for offset, raw in enumerate(block, start=before + 1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise FormatError(path, offset, f"not UTF-8 text ({err.reason} at byte {err.start})") from None
        raise  # unreachable: some line failed to decode
    lines = text.split("\n")
    if lines[-1] == "":  # the block ends with a newline
        lines.pop()
    return lines


def iter_data_lines(path: PathLike) -> Iterator[tuple[int, str]]:
    """Like :func:`iter_lines` but skipping blank lines."""
    for number, line in iter_lines(path):
        if line and not line.isspace():
            yield number, line


def iter_json_lines(path: PathLike) -> Iterator[tuple[int, dict]]:
    """Yield ``(line_number, object)`` for each non-blank line of a JSON Lines file; each must be an object."""
    for number, line in iter_data_lines(path):
        obj = parse_json(line, path, number)
        if not isinstance(obj, dict):
            raise FormatError(path, number, f"expected a JSON object, got {type(obj).__name__}")
        yield number, obj


def parse_json(text: str, path: PathLike, line: int | None = None) -> object:
    """``json.loads`` whose failures (invalid, nested too deeply) are a :class:`FormatError` naming the file."""
    try:
        return json.loads(text)
    except ValueError as err:
        raise FormatError(path, line, f"invalid JSON ({err})") from None
    except RecursionError:
        raise FormatError(path, line, "JSON nested too deeply") from None


def parse_yaml(text: str, where: str) -> object:
    """``yaml.safe_load`` whose failures (invalid, nested too deeply) are a one-line :class:`RearankError`."""
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise RearankError(f"{where}: invalid YAML ({' '.join(str(err).split())})") from None
    except RecursionError:
        raise RearankError(f"{where}: YAML nested too deeply") from None


@contextlib.contextmanager
def atomic_path(path: PathLike) -> Iterator[Path]:
    """A temp path beside ``path`` (same suffix) for writers that take a file name; on success it replaces ``path``.

    For binary outputs written by other libraries (``pyarrow.parquet.write_table``, ``Figure.savefig``,
    ``shutil.copyfile``) and for :func:`atomic_write`. If the block raises, the temp file is removed and ``path``
    is left untouched; an OS error (a full disk, a quota) is one line, not the chain of failed flushes on close.
    """
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{target.stem}.", suffix=f".tmp{target.suffix}", dir=target.parent)
        os.close(fd)
    except OSError as err:
        raise RearankError(f"{target}: cannot write ({err.strerror or err})") from None
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; give the file the mode open() would
        os.replace(tmp, target)
    except RearankError:
        _remove(tmp)
        raise
    except OSError as err:
        _remove(tmp)
        raise RearankError(f"{target}: cannot write ({err.strerror or err}); {target} is unchanged") from None
    except BaseException:
        _remove(tmp)
        raise


@contextlib.contextmanager
def atomic_write(path: PathLike, *, fsync: bool = False) -> Iterator[IO[str]]:
    """Open a text handle to a temp file beside ``path``; on success it replaces ``path`` (gzip if ``.gz``).

    If the block raises, the temp file is removed and ``path`` is left untouched. ``fsync`` flushes the file to
    disk before the rename (for a commit point that must survive a power cut).
    """
    target = Path(path)
    with atomic_path(target) as tmp:
        if is_gzip(target):
            with open(tmp, "wb") as raw, gzip.open(raw, "wt", encoding="utf-8", newline="\n") as handle:
                yield handle
        else:
            with open(tmp, "w", encoding="utf-8", newline="\n") as handle:
                yield handle
        if fsync:
            fsync_file(tmp)


@contextlib.contextmanager
def atomic_folder(path: PathLike, *, replace: bool = False) -> Iterator[Path]:
    """A new temp folder beside ``path`` to fill; on success it is renamed to ``path``, so a half-built folder
    never sits under the final name. If the block raises, the temp folder is removed.

    An existing ``path`` is swapped out (moved aside, then deleted) when ``replace``; otherwise it is kept and the
    new folder discarded (a concurrent build of the same thing that finished first).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent))
    try:
        yield tmp
        tmp.chmod(0o777 & ~_umask())  # mkdtemp made it private; give it the mode mkdir would
        old = target.with_name(f".{target.name}.old")
        if replace and target.exists():
            shutil.rmtree(old, ignore_errors=True)
            os.replace(target, old)
        try:
            os.replace(tmp, target)
        except OSError:
            if replace or not target.is_dir():
                raise
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def fsync_file(path: PathLike) -> None:
    """Flush a written file's data to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove(path: PathLike) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _umask() -> int:
    """The process umask (reading it means setting it, so set it straight back)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def collect_by_query(
    path: PathLike, rows: Iterable[tuple[str, str, V]], what: str = "judgments"
) -> dict[str, dict[str, V]]:
    """Gather ``(qid, docid, value)`` rows into ``qid -> {docid: value}`` (qrels grades, run scores).

    A (qid, docid) seen twice keeps its first value; repeats are dropped with one warning giving their count.
    """
    by_query: dict[str, dict[str, V]] = {}
    duplicates = 0
    for qid, docid, value in rows:
        values = by_query.setdefault(qid, {})
        if docid in values:
            duplicates += 1
            continue
        values[docid] = value
    if duplicates:
        log.warning("%s: %d duplicate (qid, docid) %s ignored (the first of each was kept)", path, duplicates, what)
    return by_query


def iter_tsv_pairs(path: PathLike, what: str) -> Iterator[tuple[int, str, str]]:
    """Yield ``(line_number, key, text)`` of ``key TAB text`` lines (``what`` names the key in errors)."""
    for number, line in iter_data_lines(path):
        key, tab, text = line.partition("\t")
        key = key.strip()
        if not tab:
            raise FormatError(path, number, f"expected '{what} TAB text', found no tab")
        if not key:
            raise FormatError(path, number, f"empty {what}")
        yield number, key, text.strip()


def id_problem(text: str) -> str | None:
    """Why ``text`` cannot be an identifier in a TREC run, qrels or request file, or None when it can.

    Columns are split on whitespace, and readers drop a byte-order mark at the start of a file, so an id that is
    empty, holds whitespace or starts with U+FEFF would not read back as written.
    """
    if not text:
        return "is empty"
    if any(ch.isspace() for ch in text):
        return "contains whitespace"
    if text.startswith(_BOM):
        return "starts with a byte-order mark (U+FEFF)"
    return None


def warn_repeats(path: PathLike, repeats: int, what: str) -> None:
    """One warning for the ``repeats`` ids of ``path`` seen again and ignored (the first of each was kept)."""
    if repeats:
        log.warning("%s: %d repeated %s ignored (the first of each was kept)", path, repeats, what)


def check_id(value: object, what: str, path: PathLike) -> str:
    """Return ``value`` as a string fit for an id column of the file ``path``, or raise a one-line RearankError."""
    text = str(value)
    problem = id_problem(text)
    if problem:
        raise RearankError(f"{path}: cannot write {what} {text!r}: it {problem}; ids must be non-empty, "
                           "without whitespace and not start with U+FEFF")
    return text


def check_tsv_key(value: object, what: str, path: PathLike) -> str:
    """Return ``value`` as a string fit for the first column of the TSV file ``path``, or raise RearankError."""
    text = str(value)
    if not text or text != text.strip() or any(ch in text for ch in "\t\n\r") or text.startswith(_BOM):
        raise RearankError(f"{path}: cannot write {what} {text!r}: it is empty, has surrounding spaces, contains "
                           "a tab/newline or starts with a byte-order mark (U+FEFF)")
    return text


def one_line(text: str) -> str:
    """Turn tabs and line breaks into spaces, so a text fits one TSV field."""
    return text.translate(_TSV_BREAKS)


_TSV_BREAKS = str.maketrans({"\t": " ", "\n": " ", "\r": " "})
