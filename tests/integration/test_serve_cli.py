"""``rearank serve`` as a user starts it: a subprocess on 127.0.0.1 serving the dl19 oracle, queried with curl-like
HTTP; and its argument errors."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import httpx
import pytest

from rearank.cli import main
from rearank.data.packs import load_docs, load_topics
from rearank.io.trec import read_run

#: Polls of /health, 100 ms apart, before giving up (60 s: the subprocess imports FastAPI and loads the pack).
HEALTH_POLLS = 600


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_serve_command_answers_with_the_oracle(dl19, tmp_path):
    port = free_port()
    env = {**os.environ, "REARANK_DATA": str(dl19.parents[1]), "REARANK_TEST_SERVE_KEY": "k-123"}
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([sys.executable, "-m", "rearank", "serve", "--backend", "oracle", "--dataset", "dl19",
                             "--port", str(port), "--api-key-env", "REARANK_TEST_SERVE_KEY"],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(HEALTH_POLLS):
            try:
                if httpx.get(url + "/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, (tmp_path / "server.log").read_text()
            time.sleep(0.1)
        qid, pairs = next(iter(read_run(dl19 / "run.bm25.top100.trec").items()))
        texts = load_docs(dl19 / "docs.tsv", {d for d, _ in pairs[:20]})
        query = load_topics(dl19 / "topics.tsv")[qid]
        body = {"model": "oracle", "query": query, "documents": [texts[d][1] for d, _ in pairs[:20]]}
        answer = httpx.post(url + "/v1/rerank", json=body, headers={"Authorization": "Bearer k-123"}).json()
        assert len(answer["results"]) == 20 and answer["rearank"]["status"] == "ok"
        assert httpx.post(url + "/v1/rerank", json=body).status_code == 401
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
    assert "k-123" not in (tmp_path / "server.log").read_text()


@pytest.mark.parametrize(("argv", "message"), [
    (["--backend", "oracle"], "pass --dataset, or --qrels with --topics and --docs"),
    (["--api-key-env", "REARANK_SURELY_UNSET_VAR"], "REARANK_SURELY_UNSET_VAR (the API key) is not set"),
    (["--queue-size", "0"], "--queue-size must be at least 1"),
    (["-O", "window=1"], "window must be at least 2"),
])
def test_serve_argument_errors(argv, message, capsys):
    assert main(["serve", *argv]) == 2
    assert message in capsys.readouterr().err
