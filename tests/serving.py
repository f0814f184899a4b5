"""Test helpers: an oracle rerank service judging by text, served on 127.0.0.1 in a thread for real HTTP clients;
and ``rearank serve`` run as a user runs it, in a subprocess."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import IO

import httpx

from rearank.api import Reranker
from rearank.server import Limits, RerankService, TextJudge, serve_in_thread

running = serve_in_thread


def oracle_service(topics: dict[str, str], docs: dict[str, tuple[str, str]], qrels: dict[str, dict[str, int]],
                   *, model_name: str = "rearank-oracle", method: str = "listwise",
                   options: dict[str, object] | None = None, **service: object) -> RerankService:
    """A service over the oracle backend judging requests by text (default: windows of 4 by 2, groups of 4)."""
    judge = TextJudge(topics, docs, qrels)
    if options is None:
        options = {"window": 4, "step": 2} if method == "listwise" else {"group_size": 4}
    reranker = Reranker(backend="oracle", qrels=judge.live, method=method, **options)
    limits = service.pop("limits", None) or Limits()
    return RerankService(reranker, model_name=model_name, judge=judge, limits=limits, **service)


@contextlib.contextmanager
def serve_command(argv: list[str], env: dict[str, str], log: IO | int | None = None,
                  cwd: str | None = None) -> Iterator[tuple[subprocess.Popen, str]]:
    """``python -m rearank serve ARGV`` on a socket this test bound to port 0 and already listens on (``--fd``):
    the URL is known at once, requests wait in the socket's backlog until the server takes them (no polling, no
    port picked and freed beforehand), and, the server holding the only copy, they fail at once if it exits.
    Yields the process and its base URL once ``/health`` answers; terminates it after the block."""
    with socket.create_server(("127.0.0.1", 0)) as sock:
        proc = subprocess.Popen([sys.executable, "-m", "rearank", "serve", *argv, "--fd", str(sock.fileno())],
                                stdout=log, stderr=subprocess.STDOUT if log is not None else None, env=env, cwd=cwd,
                                pass_fds=[sock.fileno()])
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    try:
        # the timeout only bounds a server that hangs while starting (imports, loading a pack)
        assert httpx.get(url + "/health", timeout=600).status_code == 200
        yield proc, url
    finally:
        proc.terminate()
        proc.wait(timeout=60)
