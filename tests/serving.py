"""Test helpers: an oracle rerank service judging by text, served on 127.0.0.1 in a thread for real HTTP clients,
with the server tests' query, passages and judgments; and ``rearank serve`` run as a user runs it, in a
subprocess."""

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

#: The server tests' query, its six passages, their judgments, the order the oracle ranks them in, and an API key.
QUERY = "what is a flea"
TEXTS = ["fleas are insects", "dogs bark", "the flea life cycle: egg, larva, pupa, adult", "cats purr",
         "flea eggs hatch in days", "stocks rose"]
TOPICS = {"q1": QUERY}
DOCS = {f"d{i}": ("", text) for i, text in enumerate(TEXTS)}
QRELS = {"q1": {"d2": 3, "d4": 2, "d0": 1}}
# Windows of 4 by 2 over 6, back to front: (2,6) sorts docs [2,3,4,5] by grade [3,0,2,0] -> [2,4,3,5];
# then (0,4) sorts [0,1,2,4] by [1,0,3,2] -> [2,4,0,1]. Final: [2,4,0,1,3,5].
EXPECTED = [2, 4, 0, 1, 3, 5]
KEY = "s3cr3t-key-for-tests"


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
