"""Test helper: run a rerank server app with uvicorn on 127.0.0.1 in a thread, for real HTTP clients."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from rearank.api import Reranker
from rearank.server import Limits, RerankService, TextJudge, create_app

#: Polls of 10 ms before giving up on the server's start (5 s).
START_POLLS = 500


@contextmanager
def running(service: RerankService) -> Iterator[str]:
    """Serve ``service`` on a free port; yield its base URL; stop it (and its batch worker) after."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(service), log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(START_POLLS):
        if server.started:
            break
        time.sleep(0.01)
    else:
        raise RuntimeError("uvicorn did not start")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


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
