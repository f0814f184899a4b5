"""``rearank serve`` as a user starts it: a subprocess on 127.0.0.1 serving the dl19 oracle, queried with curl-like
HTTP; and its argument errors."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys

import httpx
import pytest

from rearank.cli import main
from rearank.data.packs import load_docs, load_topics
from rearank.io.trec import read_run
from tests.serving import serve_command


def test_serve_command_answers_with_the_oracle(dl19, tmp_path):
    env = {**os.environ, "REARANK_DATA": str(dl19.parents[1]), "REARANK_TEST_SERVE_KEY": "k-123"}
    with open(tmp_path / "server.log", "w") as log, \
            serve_command(["--backend", "oracle", "--dataset", "dl19", "--api-key-env", "REARANK_TEST_SERVE_KEY"],
                          env, log) as (_, url):
        qid, pairs = next(iter(read_run(dl19 / "run.bm25.top100.trec").items()))
        texts = load_docs(dl19 / "docs.tsv", {d for d, _ in pairs[:20]})
        query = load_topics(dl19 / "topics.tsv")[qid]
        body = {"model": "oracle", "query": query, "documents": [texts[d][1] for d, _ in pairs[:20]]}
        answer = httpx.post(url + "/v1/rerank", json=body, headers={"Authorization": "Bearer k-123"},
                            timeout=600).json()
        assert len(answer["results"]) == 20 and answer["rearank"]["status"] == "ok"
        assert httpx.post(url + "/v1/rerank", json=body, timeout=600).status_code == 401
    text = (tmp_path / "server.log").read_text()
    assert f"serving 'oracle' (listwise, oracle) at {url} (bearer key required)" in text and "k-123" not in text


def test_port_0_serves_on_the_port_the_os_picked_and_names_it(dl19):
    """``--port 0``: the 'serving ... at' line names the port bound, and the server answers there."""
    env = {**os.environ, "REARANK_DATA": str(dl19.parents[1])}
    proc = subprocess.Popen([sys.executable, "-m", "rearank", "serve", "--backend", "oracle", "--dataset", "dl19",
                             "--port", "0"], stderr=subprocess.PIPE, text=True, env=env)
    try:
        seen = []
        for line in proc.stderr:  # blocks until a line is written; the line is printed once the port is bound
            seen.append(line)
            found = re.search(r"serving 'oracle' \(listwise, oracle\) at (http://127\.0\.0\.1:(\d+))$", line.strip())
            if found:
                break
        assert found and int(found[2]) > 0, "".join(seen)
        assert httpx.get(found[1] + "/health", timeout=600).status_code == 200  # bound and listening: waits in the backlog
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        proc.stderr.close()


def test_fd_that_is_not_a_listening_socket_is_a_clear_error(tmp_path, capsys):
    with socket.socket() as sock:  # bound, not listening
        sock.bind(("127.0.0.1", 0))
        assert main(["serve", "--backend", "oracle", "--fd", str(sock.fileno())]) == 2
        assert f"--fd {sock.fileno()}: not a listening TCP socket" in capsys.readouterr().err
        assert sock.fileno() >= 0  # still open: the check does not close what it was handed
    with open(tmp_path / "f", "w") as handle:
        fd = handle.fileno()
        assert main(["serve", "--backend", "oracle", "--fd", str(fd)]) == 2
    assert f"--fd {fd}: not an open socket (Socket operation on non-socket)" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "message"), [
    (["--backend", "oracle"], "pass --dataset, or --qrels with --topics and --docs"),
    (["--api-key-env", "REARANK_SURELY_UNSET_VAR"], "REARANK_SURELY_UNSET_VAR (the API key) is not set"),
    (["--queue-size", "0"], "--queue-size must be at least 1"),
    (["-O", "window=1"], "window must be at least 2"),
])
def test_serve_argument_errors(argv, message, capsys):
    assert main(["serve", *argv]) == 2
    assert message in capsys.readouterr().err
