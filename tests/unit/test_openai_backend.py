"""The openai backend's HTTP logic against a scripted stub server on 127.0.0.1 (retries, backoff, timeouts, keys).

The stub only answers what each test scripts; the real end-to-end check (a server generating with the
hf backend) is tests/slow/test_openai_server.py.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rearank.backends.base import Prompt, SamplingSettings
from rearank.backends.openai import OpenAIBackend, chat_completions_url
from rearank.errors import RearankError

SECRET = "sk-test-5f1e9c0d7a2b4e6f8a1c3d5e7f9b0a2c"
#: timeout_s: a bound for a broken run only; no test here waits for it but test_timeout_is_retried
FAST = {"backoff_s": 0.05, "max_backoff_s": 1.0, "timeout_s": 60.0}


@dataclass
class Reply:
    status: int = 200
    body: object = None  # dict -> JSON; str -> raw text; None -> a completion echoing the last user message
    headers: dict = field(default_factory=dict)
    hold: bool = False  # answer only when the test calls Stub.release() (a server that never answers in time)
    gather: int = 0  # answer only once this many requests have been in flight together


def completion(content: str, finish_reason: str = "stop", usage: dict | None = None, **message: object) -> dict:
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": content, **message},
                         "finish_reason": finish_reason}],
            "usage": usage if usage is not None else {"prompt_tokens": 11, "completion_tokens": 7}}


class Stub(ThreadingHTTPServer):
    """Answers POSTs with the scripted replies in turn (the last one repeats) and records every request."""

    daemon_threads = True

    def __init__(self, script: list[Reply]) -> None:
        super().__init__(("127.0.0.1", 0), _StubHandler)
        self.script = script
        self.requests: list[dict] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.guard = threading.Condition()
        self.released = threading.Event()

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def next_reply(self, record: dict) -> Reply:
        with self.guard:
            reply = self.script[min(len(self.requests), len(self.script) - 1)]
            self.requests.append(record)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.guard.notify_all()
            if reply.gather:  # a bound on a wait that only a broken client makes long: fails, does not hang
                assert self.guard.wait_for(lambda: self.max_in_flight >= reply.gather, timeout=60)
        return reply

    def release(self) -> None:
        self.released.set()


class _StubHandler(BaseHTTPRequestHandler):
    server: Stub

    def log_message(self, format, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        record = {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
        reply = self.server.next_reply(record)
        try:
            if reply.hold:
                self.server.released.wait()
                return
            payload = reply.body
            if payload is None:
                payload = completion(f"echo: {body['messages'][-1]['content']}")
            data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
            pass
        finally:
            with self.server.guard:
                self.server.in_flight -= 1


@pytest.fixture
def stub():
    servers: list[Stub] = []

    def start(*script: Reply) -> Stub:
        server = Stub(list(script) or [Reply()])
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.release()
        server.shutdown()
        server.server_close()


@pytest.fixture(autouse=True)
def no_ambient_config(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def prompt(text: str = "hello") -> Prompt:
    return Prompt(messages=({"role": "system", "content": "Be brief."}, {"role": "user", "content": text}))


SETTINGS = SamplingSettings(max_new_tokens=33)


@pytest.mark.parametrize("base, expected", [
    ("http://h:8000", "http://h:8000/v1/chat/completions"),
    ("http://h:8000/", "http://h:8000/v1/chat/completions"),
    ("http://h:8000/v1", "http://h:8000/v1/chat/completions"),
    ("http://h:8000/v1/", "http://h:8000/v1/chat/completions"),
    ("https://api.example.com/v1beta/openai/", "https://api.example.com/v1beta/openai/chat/completions"),
    ("http://h/v1/chat/completions", "http://h/v1/chat/completions"),
])
def test_chat_completions_url(base, expected):
    assert chat_completions_url(base) == expected


@pytest.mark.parametrize("bad", ["localhost:8000", "ftp://h/v1", "http:///v1", ""])
def test_bad_base_url_is_a_clear_error(bad):
    with pytest.raises(RearankError, match="bad base URL"):
        chat_completions_url(bad)


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
def test_request_reaches_the_endpoint_with_or_without_v1_and_slash(stub, suffix):
    server = stub(Reply(body=completion("[2] > [1]", "length", {"prompt_tokens": 40, "completion_tokens": 33})))
    backend = OpenAIBackend("served-model", base_url=server.root + suffix, **FAST)
    [gen] = backend.generate([prompt()], SETTINGS)
    assert (gen.text, gen.prompt_tokens, gen.completion_tokens, gen.finish_reason) == ("[2] > [1]", 40, 33, "length")
    [request] = server.requests
    assert request["path"] == "/v1/chat/completions"
    body = request["body"]
    assert body["model"] == "served-model"
    assert body["max_tokens"] == 33 and body["temperature"] == 0.0
    assert "seed" not in body  # greedy: a seed means nothing
    assert body["messages"] == [dict(m) for m in prompt().messages]
    assert request["auth"] is None  # no key in the environment: no header


def test_sampling_sends_seed_and_extra_body(stub):
    server = stub()
    backend = OpenAIBackend("m", base_url=server.root, extra_body={"chat_template_kwargs": {"enable_thinking": False}},
                            **FAST)
    backend.generate([prompt()], SamplingSettings(max_new_tokens=5, temperature=0.7, top_p=0.9, seed=13))
    body = server.requests[0]["body"]
    assert (body["temperature"], body["top_p"], body["seed"], body["max_tokens"]) == (0.7, 0.9, 13, 5)
    assert body["chat_template_kwargs"] == {"enable_thinking": False}


def test_retries_429_and_5xx_with_growing_backoff(stub):
    server = stub(Reply(429), Reply(500), Reply(502), Reply())
    backend = OpenAIBackend("m", base_url=server.root, max_retries=4, backoff_s=0.1, max_backoff_s=5.0, timeout_s=5.0)
    waits: list[float] = []
    backend._sleep = waits.append  # the waits the backend asks for, not the wall clock's
    [gen] = backend.generate([prompt("x")], SETTINGS)
    assert gen.finish_reason == "stop" and gen.text == "echo: x"
    assert len(server.requests) == 4 and len(waits) == 3
    # backoff_s * 2**k with up to 25% jitter
    for wait, (low, high) in zip(waits, [(0.1, 0.125), (0.2, 0.25), (0.4, 0.5)], strict=True):
        assert low <= wait <= high, waits


def test_persistent_failure_gives_an_error_generation_after_bounded_retries(stub, caplog):
    server = stub(Reply(503, body={"error": "overloaded"}))
    backend = OpenAIBackend("m", base_url=server.root, max_retries=3, **FAST)
    with caplog.at_level(logging.WARNING, logger="rearank.backends.openai"):
        gens = backend.generate([prompt("a"), prompt("b")], SETTINGS)
    assert [(g.text, g.finish_reason, g.prompt_tokens, g.completion_tokens) for g in gens] == [("", "error", 0, 0)] * 2
    assert len(server.requests) == 2 * 4
    assert "HTTP 503" in caplog.text


def test_client_errors_are_not_retried(stub):
    server = stub(Reply(400, body={"error": {"message": "max_tokens too large"}}))
    [gen] = OpenAIBackend("m", base_url=server.root, max_retries=3, **FAST).generate([prompt()], SETTINGS)
    assert gen.finish_reason == "error"
    assert len(server.requests) == 1


def test_malformed_response_is_an_error_not_a_crash(stub):
    server = stub(Reply(200, body="<html>gateway</html>"))
    [gen] = OpenAIBackend("m", base_url=server.root, max_retries=3, **FAST).generate([prompt()], SETTINGS)
    assert gen.finish_reason == "error" and gen.text == ""
    assert len(server.requests) == 1


def test_timeout_is_retried(stub):
    # the first reply never comes while the client waits, so only a timeout and a retry can give the answer; a
    # later reply slowed past timeout_s by a busy machine is retried too, so the outcome does not hang on the clock
    server = stub(Reply(hold=True), Reply())
    backend = OpenAIBackend("m", base_url=server.root, timeout_s=1.0, max_retries=5, backoff_s=0.01)
    [gen] = backend.generate([prompt("late")], SETTINGS)
    assert gen.text == "echo: late" and len(server.requests) >= 2


def test_connection_refused_is_retried_then_an_error():
    with socket.socket() as sock:  # bound, never listening: connections are refused, and no one else can take it
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        backend = OpenAIBackend("m", base_url=f"http://127.0.0.1:{port}", max_retries=2, backoff_s=0.05,
                                timeout_s=2.0)
        waits: list[float] = []
        backend._sleep = waits.append
        [gen] = backend.generate([prompt()], SETTINGS)
    assert gen.finish_reason == "error"
    # backoff_s * 2**k with up to 25% jitter: 0.05..0.0625, then 0.1..0.125
    assert len(waits) == 2 and 0.05 <= waits[0] <= 0.0625 and 0.1 <= waits[1] <= 0.125


def test_retry_after_header_is_honoured(stub):
    server = stub(Reply(429, headers={"Retry-After": "0.4"}), Reply())
    backend = OpenAIBackend("m", base_url=server.root, backoff_s=0.01, max_backoff_s=5.0, timeout_s=5.0)
    waits: list[float] = []
    backend._sleep = waits.append
    backend.generate([prompt()], SETTINGS)
    assert waits == [0.4] and len(server.requests) == 2  # the server's wait beat backoff_s (0.01 .. 0.0125)


def test_concurrency_limit_and_input_order(stub):
    # the first three replies wait until three requests are in flight together: the limit is reached whatever
    # the speed of the client's threads, and a fourth request would show in max_in_flight
    server = stub(*[Reply(gather=3)] * 3, Reply())
    backend = OpenAIBackend("m", base_url=server.root, concurrency=3, **FAST)
    gens = backend.generate([prompt(f"q{i}") for i in range(7)], SETTINGS)
    assert [g.text for g in gens] == [f"echo: q{i}" for i in range(7)]
    assert server.max_in_flight == 3


def test_reasoning_field_is_kept_as_think_block_and_missing_usage_counts_zero(stub):
    server = stub(Reply(body={"choices": [{"message": {"content": "<answer>[1]</answer>",
                                                       "reasoning_content": "passage 1 fits"},
                                           "finish_reason": "stop"}]}))
    [gen] = OpenAIBackend("m", base_url=server.root, **FAST).generate([prompt()], SETTINGS)
    assert gen.text == "<think>passage 1 fits</think><answer>[1]</answer>"
    assert (gen.prompt_tokens, gen.completion_tokens) == (0, 0)


def test_api_key_is_sent_but_never_logged_or_returned(stub, monkeypatch, caplog):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    # A careless server that echoes the Authorization header in its error text.
    leak = {"error": {"message": f"invalid key Bearer {SECRET}"}}
    server = stub(Reply(500, body=leak), Reply(401, body=leak))
    backend = OpenAIBackend("m", base_url=server.root, max_retries=2, **FAST)
    with caplog.at_level(logging.DEBUG):
        [gen] = backend.generate([prompt()], SETTINGS)
    assert [r["auth"] for r in server.requests] == [f"Bearer {SECRET}"] * 2
    assert gen.finish_reason == "error"
    assert "HTTP 401" in caplog.text and "***" in caplog.text
    for text in (caplog.text, repr(backend), str(vars(gen)), str(backend.__dict__.get("url"))):
        assert SECRET not in text


def test_api_key_env_names_the_variable(stub, monkeypatch):
    monkeypatch.setenv("MY_PROVIDER_KEY", SECRET)
    server = stub()
    OpenAIBackend("m", base_url=server.root, api_key_env="MY_PROVIDER_KEY", **FAST).generate([prompt()], SETTINGS)
    assert server.requests[0]["auth"] == f"Bearer {SECRET}"
    with pytest.raises(RearankError, match="NOT_SET_KEY") as err:
        OpenAIBackend("m", base_url=server.root, api_key_env="NOT_SET_KEY")
    assert SECRET not in str(err.value)


def test_model_is_required():
    with pytest.raises(RearankError, match="--model"):
        OpenAIBackend(None)
