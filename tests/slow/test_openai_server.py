"""The openai backend end to end: a real chat-completions server on 127.0.0.1 generating with the hf backend."""

from __future__ import annotations

import logging
import threading

import pytest

from rearank.backends.base import Prompt, SamplingSettings
from rearank.backends.chat_server import ChatServer

pytestmark = pytest.mark.slow

SECRET = "sk-live-0b8d6f4e2a9c7e5b3d1f0a8c6e4b2d9f"
PROMPTS = [
    Prompt(messages=({"role": "user", "content": "What is the capital of France?"},)),
    Prompt(messages=({"role": "system", "content": "You are terse."},
                     {"role": "user", "content": "Write a long poem about the sea."})),
]
SETTINGS = SamplingSettings(max_new_tokens=10)


@pytest.fixture(scope="module")
def hf():
    from rearank.backends.registry import make_backend

    return make_backend("hf", "embedded")


@pytest.fixture(scope="module")
def server(hf):
    srv = ChatServer(hf, model_name="smollm2-135m")
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(timeout=10)


@pytest.fixture
def client(server, monkeypatch):
    from rearank.backends.registry import make_backend

    monkeypatch.setenv("REARANK_TEST_KEY", SECRET)
    backend = make_backend("openai", "smollm2-135m", base_url=server.base_url + "/", api_key_env="REARANK_TEST_KEY",
                           concurrency=2, timeout_s=300, max_retries=1, backoff_s=0.1)
    yield backend
    backend.close()


def test_served_generations_equal_the_hf_backend(hf, client, caplog, capsys):
    with caplog.at_level(logging.DEBUG):
        served = client.generate(PROMPTS, SETTINGS)
    direct = [hf.generate([p], SETTINGS)[0] for p in PROMPTS]
    assert [(g.text, g.prompt_tokens, g.completion_tokens, g.finish_reason) for g in served] == [
        (g.text, g.prompt_tokens, g.completion_tokens, g.finish_reason) for g in direct]
    assert [g.finish_reason for g in served] == ["stop", "length"]
    assert all(g.latency_s > 0 for g in served)
    captured = capsys.readouterr()
    for text in (caplog.text, captured.out, captured.err, repr(client), str([vars(g) for g in served])):
        assert SECRET not in text


def test_unknown_served_model_is_an_error_generation(server, monkeypatch, caplog):
    from rearank.backends.openai import OpenAIBackend

    backend = OpenAIBackend("gpt-4o", base_url=server.base_url, max_retries=2, backoff_s=0.01)
    with caplog.at_level(logging.WARNING):
        [gen] = backend.generate(PROMPTS[:1], SETTINGS)
    assert (gen.text, gen.finish_reason) == ("", "error")
    assert "HTTP 404" in caplog.text and "does not exist" in caplog.text
