"""What the rerank server does when it is told to stop (Ctrl-C or SIGTERM set uvicorn's ``should_exit``, as here):
it stops listening at once, so a new connection is refused; the request it is ranking is answered in full (200);
then its engine stops. docs/serving.md says so."""

from __future__ import annotations

import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import uvicorn

from rearank.server import create_app
from tests.serving import EXPECTED, QUERY, TEXTS
from tests.unit.test_server_app_edges import service_of

CALL_S = 1.0  # each backend call of the oracle takes this long: the request below is in flight for two of them


def refused(address: tuple[str, int], within_s: float = 10.0) -> bool:
    """Whether a connection to ``address`` is refused within ``within_s`` (the server closes its listening socket on
    its next tick, 0.1 s apart)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(address, timeout=1).close()
        except ConnectionRefusedError:
            return True
        time.sleep(0.02)
    return False


def test_a_stopping_server_refuses_new_connections_and_answers_the_request_it_has():
    service = service_of()
    answer = service.reranker.backend.generate

    def slow(prompts, settings):
        time.sleep(CALL_S)
        return answer(prompts, settings)

    service.reranker.backend.generate = slow
    sock = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(create_app(service), log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.01)
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(httpx.post, url + "/v1/rerank", json={"query": QUERY, "documents": TEXTS},
                                  timeout=60)
            while service.feed.load == 0:  # the request reached the engine
                time.sleep(0.01)
            server.should_exit = True  # what uvicorn's SIGINT/SIGTERM handler does
            refused_while_ranking = refused(sock.getsockname()) and not pending.done()
            with pytest.raises(httpx.ConnectError):
                httpx.post(url + "/v1/rerank", json={"query": QUERY, "documents": TEXTS}, timeout=5)
            finished = pending.result()
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
    assert refused_while_ranking
    assert finished.status_code == 200 and finished.json()["rearank"]["order"] == EXPECTED
    assert not thread.is_alive()
