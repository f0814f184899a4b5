"""Child-process servers of the checks: waiting for a server to answer, stopping it, the QA-oracle reader (on a
port of :func:`rearank.testing.ports.free_port`)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

from rearank.errors import RearankError
from rearank.testing.ports import free_port


def wait_until_answering(url: str, proc: subprocess.Popen, limit_s: float, poll_s: float,
                         where: Callable[[], str]) -> None:
    """Return once ``GET <url>/models`` answers; a child that exits first, or ``limit_s`` seconds of silence, is a
    :class:`RearankError` ending with ``where()`` (its log, or its output's end)."""
    deadline = time.monotonic() + limit_s
    while True:
        if proc.poll() is not None:
            raise RearankError(f"the reader server exited with {proc.returncode}; {where()}")
        try:
            urllib.request.urlopen(f"{url}/models", timeout=max(1.0, poll_s * 4)).read()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise RearankError(f"the reader server did not answer within {limit_s:.0f} s; {where()}") from None
            time.sleep(poll_s)


def stop(proc: subprocess.Popen, grace_s: float) -> None:
    """Terminate the child; kill it when it has not exited after ``grace_s`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def reader_server(qa_file: Path, name: str = "reader") -> Iterator[str]:
    """``python -m rearank.backends.chat_server --backend qa-oracle`` on 127.0.0.1 in a child process; yields its base URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rearank.backends.chat_server", "--backend", "qa-oracle", "--model", str(qa_file),
         "--served-name", name, "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_until_answering(base_url, proc, 60, 0.2, lambda: f"its output's end: {proc.stderr.read().decode()[-500:]}")
        yield base_url
    finally:
        stop(proc, 10)
