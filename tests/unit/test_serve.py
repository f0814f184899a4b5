"""The chat-completions server's HTTP schema, with a deterministic in-test backend (the model-backed run is slow-tier)."""

from __future__ import annotations

import threading

import httpx
import pytest

from rearank.backends.base import Generation, Prompt, SamplingSettings
from rearank.backends.chat_server import ChatServer
from rearank.backends.openai import OpenAIBackend


class Reverser:
    """Answers with the last user message reversed, cut to max_new_tokens characters."""

    name = "reverser"

    def generate(self, prompts: list[Prompt], settings: SamplingSettings) -> list[Generation]:
        out = []
        for p in prompts:
            text = p.messages[-1]["content"][::-1]
            cut = len(text) > settings.max_new_tokens
            out.append(Generation(text=text[:settings.max_new_tokens], prompt_tokens=len(p.messages),
                                  completion_tokens=min(len(text), settings.max_new_tokens),
                                  finish_reason="length" if cut else "stop"))
        return out


@pytest.fixture
def server():
    srv = ChatServer(Reverser(), model_name="rev")
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_roundtrip_through_the_openai_backend(server):
    backend = OpenAIBackend("rev", base_url=server.base_url, max_retries=0)
    prompts = [Prompt(messages=({"role": "user", "content": "abc"},)),
               Prompt(messages=({"role": "system", "content": "s"}, {"role": "user", "content": "abcdefgh"}))]
    gens = backend.generate(prompts, SamplingSettings(max_new_tokens=5))
    assert [(g.text, g.prompt_tokens, g.completion_tokens, g.finish_reason) for g in gens] == [
        ("cba", 1, 3, "stop"), ("hgfed", 2, 5, "length")]


def test_schema_and_errors(server):
    root = server.base_url
    assert httpx.get(f"{root}/models").json()["data"][0]["id"] == "rev"
    ok = httpx.post(f"{root}/chat/completions", json={"model": "rev", "messages": [{"role": "user", "content": "xy"}],
                                                       "max_tokens": 9}).json()
    assert ok["object"] == "chat.completion"
    assert ok["choices"][0]["message"] == {"role": "assistant", "content": "yx"}
    assert ok["usage"] == {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
    wrong = httpx.post(f"{root}/chat/completions", json={"model": "other", "messages": []})
    assert wrong.status_code == 404 and "does not exist" in wrong.json()["error"]["message"]
    bad = httpx.post(f"{root}/chat/completions", json={"model": "rev", "messages": "hi"})
    assert bad.status_code == 400
    assert httpx.post(f"{root}/completions", json={}).status_code == 404


@pytest.mark.parametrize(("change", "message"), [
    ({"model": None}, "bad request: 'model' is required; this server serves 'rev'"),
    ({"stream": True}, ('bad request: streaming is not supported (each answer is one whole chat.completion); send '
                       '"stream": false or leave it out')),
])
def test_a_missing_model_or_a_stream_is_a_bad_request(server, change, message):
    body = {key: value for key, value in {"model": "rev", "messages": [{"role": "user", "content": "xy"}],
                                          **change}.items() if value is not None}
    answer = httpx.post(f"{server.base_url}/chat/completions", json=body)
    assert (answer.status_code, answer.json()) == (400, {"error": {"message": message}})
