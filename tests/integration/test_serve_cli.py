"""``rearank serve`` as a user starts it: a subprocess on 127.0.0.1 serving the dl19 oracle, queried with curl-like
HTTP; and its argument errors."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from rearank.cli import main
from rearank.data.packs import load_docs, load_topics
from rearank.io.trec import read_run

#: Polls of /health, 100 ms apart, before giving up (60 s: the subprocess imports FastAPI and loads the pack).
HEALTH_POLLS = 600


def bound_url(proc: subprocess.Popen, log: Path) -> str:
    """The address a server started with ``--port 0`` bound (uvicorn logs it), once it answers /health."""
    for _ in range(HEALTH_POLLS):
        assert proc.poll() is None, log.read_text()
        found = re.search(r"Uvicorn running on (http://127\.0\.0\.1:\d+)", log.read_text())
        if found:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(found[1] + "/health").status_code == 200:
                    return found[1]
        time.sleep(0.1)
    raise AssertionError(f"the server did not come up: {log.read_text()}")


def test_serve_command_answers_with_the_oracle(dl19, tmp_path):
    env = {**os.environ, "REARANK_DATA": str(dl19.parents[1]), "REARANK_TEST_SERVE_KEY": "k-123"}
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115 - closed below
    # port 0: the OS picks a free port as the server binds (a port picked beforehand could be taken meanwhile)
    proc = subprocess.Popen([sys.executable, "-m", "rearank", "serve", "--backend", "oracle", "--dataset", "dl19",
                             "--port", "0", "--api-key-env", "REARANK_TEST_SERVE_KEY"],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        url = bound_url(proc, tmp_path / "server.log")
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
