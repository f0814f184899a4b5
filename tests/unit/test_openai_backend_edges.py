"""The openai backend's edges with httpx's in-process transport and a fake clock (no sockets, no waits): option
checks and defaults, the pool size, the in-flight counts and 429 readings, every problem's logged message, the size
and deadline bounds, and the latencies."""

from __future__ import annotations

import itertools
import json
import logging
from types import SimpleNamespace

import httpx
import pytest

from rearank.backends import openai
from rearank.backends.constrain import EXTRA_KEY
from rearank.backends.metrics import ServerLoad
from rearank.backends.openai import OpenAIBackend, _retry_after, _retryable, chat_completions_url
from rearank.errors import RearankError
from tests.unit.test_concurrency import VLLM_PAGE
from tests.unit.test_constrain_openai import GRAMMAR, PROMPT, SETTINGS
from tests.unit.test_openai_backend import completion, no_ambient_config, prompt  # noqa: F401 (autouse fixture)

URL = "http://llm.test/v1/chat/completions"
KEPT = "the window keeps its input order"


def served(script: list, **options) -> OpenAIBackend:
    """A backend whose requests get ``script``'s answers in turn (the last repeating): each a function of the backend
    (called when its request comes) giving the response, or an exception raised; waits are not slept."""
    backend = OpenAIBackend("m", base_url="http://llm.test/v1", **options)
    backend.seen = []

    def answer(request: httpx.Request) -> httpx.Response:
        backend.seen.append(request)
        item = script[min(len(backend.seen), len(script)) - 1]
        if isinstance(item, Exception):
            raise item
        return item(backend)

    backend._client.close()  # as the backend makes it, less the network
    backend._client = httpx.Client(transport=httpx.MockTransport(answer), timeout=httpx.Timeout(backend.timeout_s))
    backend._sleep = lambda delay: None
    return backend


def reply(status: int = 200, body: object = None, **headers: str):
    """A script's answer: ``body`` (bytes as they are, else as JSON; default a completion ``ok``)."""
    data = body if isinstance(body, bytes) else json.dumps(completion("ok") if body is None else body).encode()
    return lambda backend: httpx.Response(status, content=data, headers=headers)


def chunked(*chunks: bytes):
    """A script's answer: a 200 whose body comes in ``chunks``."""
    return lambda backend: httpx.Response(200, content=iter(chunks))


def fake_clock(monkeypatch, perf: list[float], mono: list[float]) -> None:
    """The module's clocks give ``perf`` and ``mono`` in turn (each list's last value repeating)."""
    def ticks(values: list[float]):
        calls = itertools.count()
        return lambda: values[min(next(calls), len(values) - 1)]
    monkeypatch.setattr(openai, "time", SimpleNamespace(perf_counter=ticks(perf), monotonic=ticks(mono), sleep=None))


def warning(caplog) -> str:
    [record] = [r for r in caplog.records if r.levelno == logging.WARNING and r.name == openai.__name__]
    return record.getMessage()


@pytest.mark.parametrize(("status", "retried"), [(408, True), (429, True), (500, True), (599, True), (400, False),
                                                 (409, False), (422, False), (499, False)])
def test_retryable_statuses(status, retried):
    assert _retryable(status) is retried


@pytest.mark.parametrize(("value", "seconds"), [("2.5", 2.5), ("0", 0.0), ("-3", 0.0), ("", None), (None, None),
                                                ("Wed, 21 Oct 2015 07:28:00 GMT", None)])
def test_retry_after_header(value, seconds):
    assert _retry_after(value) == seconds


def test_a_path_ending_in_x_keeps_it():
    assert chat_completions_url("http://h/gateway/X/") == "http://h/gateway/X/chat/completions"


@pytest.mark.parametrize(("concurrency", "connections"), [(3, 3), ("auto", None)])
def test_the_connection_pool_holds_concurrency_and_each_attempt_has_timeout_s(monkeypatch, concurrency, connections):
    made = []
    limits = httpx.Limits
    monkeypatch.setattr(httpx, "Limits", lambda **bounds: made.append(bounds) or limits(**bounds))
    backend = OpenAIBackend("m", concurrency=concurrency, timeout_s=7.5)
    assert made == [{"max_connections": connections, "max_keepalive_connections": connections}]
    assert backend._client.timeout == httpx.Timeout(7.5)


def test_defaults():
    backend = OpenAIBackend("m")
    assert backend.url == "http://127.0.0.1:8000/v1/chat/completions"
    assert (backend.timeout_s, backend.max_retries, backend.backoff_s, backend.max_backoff_s) == (600.0, 4, 1.0, 60.0)
    assert (backend.max_response_bytes, backend.extra_body, backend.constrain) == (8 << 20, {}, False)


def test_base_url_from_the_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://env-host:9/v2")
    assert OpenAIBackend("m").url == "http://env-host:9/v2/chat/completions"
    assert OpenAIBackend("m", base_url="http://given:1").url == "http://given:1/v1/chat/completions"


@pytest.mark.parametrize(("name", "value"), [("base_url", ""), ("api_key_env", ""), ("concurrency", 0),
                                             ("timeout_s", 0), ("max_retries", -1), ("backoff_s", -1),
                                             ("max_backoff_s", -1), ("max_response_bytes", 0), ("extra_body", "x")])
def test_each_option_is_checked_under_its_name(name, value):
    with pytest.raises(RearankError, match=rf"^backend option {name}={value!r} \(openai\): "):
        OpenAIBackend("m", **{name: value})


def test_option_errors_read_in_full():
    with pytest.raises(RearankError) as err:
        OpenAIBackend("")
    assert str(err.value) == ("the openai backend needs --model: the model name the server serves "
                              "(listed by GET <base URL>/models)")
    with pytest.raises(RearankError) as err:
        OpenAIBackend("m", max_think_tokens=10)
    assert str(err.value) == ("backend option max_think_tokens (openai) needs -O structured_output=rearank: a vLLM "
                              "server started with --logits-processors rearank.backends.vllm_constrain:AnswerLogitsProcessor")
    with pytest.raises(RearankError, match=r"^backend option constrain='yes' \(openai\): "):
        OpenAIBackend("m", constrain="yes")


def test_max_think_tokens_goes_to_the_rearank_processor():
    backend = OpenAIBackend("m", structured_output="rearank", max_think_tokens=10)
    spec = json.loads(backend._payload(PROMPT, SETTINGS)["vllm_xargs"][EXTRA_KEY])
    assert (spec["max_think_tokens"], spec["max_new_tokens"], spec["constrain"]) == (10, 64, False)


@pytest.mark.parametrize(("extra_body", "thinking", "expected"), [
    (None, None, {}),
    (None, False, {"chat_template_kwargs": {"enable_thinking": False}}),
    ({"chat_template_kwargs": {"a": 1}, "x": 2}, True, {"chat_template_kwargs": {"a": 1, "enable_thinking": True}, "x": 2}),
])
def test_enable_thinking_joins_the_template_kwargs(extra_body, thinking, expected):
    assert OpenAIBackend("m", extra_body=extra_body, enable_thinking=thinking).extra_body == expected


def test_server_load_is_read_within_5s_and_only_from_a_200():
    backend = served([reply(200, VLLM_PAGE.encode()), reply(503, VLLM_PAGE.encode())])
    assert backend.server_load() == ServerLoad(3, 1, 0.25)
    assert backend.server_load() is None
    assert [str(r.url) for r in backend.seen] == ["http://llm.test/metrics"] * 2
    assert backend.seen[0].extensions["timeout"] == {"connect": 5.0, "read": 5.0, "write": 5.0, "pool": 5.0}


@pytest.mark.parametrize(("concurrency", "prompts", "workers"), [(3, 7, 3), ("auto", 20, 8), ("auto", 2, 2),
                                                                 (5, 2, 2)])
def test_pool_size(monkeypatch, concurrency, prompts, workers):
    pools = []

    class Pool(openai.ThreadPoolExecutor):
        def __init__(self, max_workers):
            pools.append(max_workers)
            super().__init__(max_workers)

    monkeypatch.setattr(openai, "ThreadPoolExecutor", Pool)
    gens = served([reply()], concurrency=concurrency).generate([prompt()] * prompts, SETTINGS)
    assert pools == [workers] and [g.text for g in gens] == ["ok"] * prompts


def test_a_request_waiting_to_retry_is_not_held_by_the_server():
    # a second request starts while the first waits to retry: the server held neither when it turned the second away
    backend = served([reply(429), reply(429), reply()])
    seen = []

    def sleep(delay):
        seen.append((backend._active, backend._retrying, backend.held_at_429))
        if len(seen) == 1:
            seen.append(backend.generate([prompt("b")], SETTINGS)[0].text)

    backend._sleep = sleep
    [gen] = backend.generate([prompt("a")], SETTINGS)
    assert seen == [(1, 1, 0), (2, 2, 0), "ok"]
    assert (gen.text, gen.throttled, backend.throttles) == ("ok", 1, 2)
    assert (backend._active, backend._retrying) == (0, 0)


def test_held_at_429_is_the_second_fewest_of_the_last_8():
    held = [3, 1, 0, 7, 7, 7, 7, 7, 7, 7]  # the others the server held at each 429

    def throttle(others: int):
        def answer(backend):
            backend._active = others + 1  # this request and the others
            return reply(429)(backend)
        return answer

    backend = served([throttle(n) for n in held], max_retries=len(held) - 1)
    readings = []
    backend._sleep = lambda delay: readings.append(backend.held_at_429)
    gen = backend._request(backend._payload(prompt(), SETTINGS))
    assert readings + [backend.held_at_429] == [3, 3, 1, 1, 1, 1, 1, 1, 1, 7]
    assert (gen.finish_reason, gen.throttled, backend.throttles) == ("error", 10, 10)


def test_only_429_and_503_are_throttles():
    backend = served([reply(503), reply(503), reply(504), reply(429), reply()], max_retries=4)
    [gen] = backend.generate([prompt()], SETTINGS)
    assert (gen.text, gen.throttled, backend.throttles) == ("ok", 3, 3)


def test_each_retry_and_the_failure_are_logged_with_the_problem(monkeypatch, caplog):
    fake_clock(monkeypatch, perf=[10.0, 12.5], mono=[0.0])
    backend = served([reply(429, b"slow", **{"Retry-After": "0.5"}), reply(500, b"\xff bad"),
                      httpx.ConnectError("refused")], max_retries=2, backoff_s=0)
    waits = []
    backend._sleep = waits.append
    with caplog.at_level(logging.INFO, logger="rearank.backends.openai"):
        [gen] = backend.generate([prompt()], SETTINGS)
    assert [r.getMessage() for r in caplog.records if r.name == openai.__name__] == [
        "openai backend: HTTP 429: slow; retry 1/2 in 0.50s",
        "openai backend: HTTP 500: \ufffd bad; retry 2/2 in 0.00s",
        f"openai backend: request to {URL} failed (connection error (ConnectError: refused)); {KEPT}"]
    assert waits == [0.5, 0.0]
    assert (gen.text, gen.finish_reason, gen.latency_s, gen.throttled) == ("", "error", 2.5, 1)


@pytest.mark.parametrize(("body", "problem"), [
    (b"{}", "malformed response (KeyError: 'choices')"),
    ({"choices": [{"message": {"content": [1]}}]}, "malformed response (TypeError: message content is list, not text)"),
    (b"x" * 400, "HTTP 400: " + "x" * 300),
])
def test_the_problem_of_a_failed_window(caplog, body, problem):
    backend = served([reply(400 if body == b"x" * 400 else 200, body)], max_retries=3)
    with caplog.at_level(logging.WARNING, logger="rearank.backends.openai"):
        [gen] = backend.generate([prompt()], SETTINGS)
    assert gen.finish_reason == "error" and len(backend.seen) == 1
    assert warning(caplog) == f"openai backend: request to {URL} failed ({problem}); {KEPT}"


def test_latency_of_an_answer(monkeypatch):
    fake_clock(monkeypatch, perf=[10.0, 12.5], mono=[0.0])
    [gen] = served([reply()]).generate([prompt()], SETTINGS)
    assert (gen.text, gen.latency_s, gen.throttled) == ("ok", 2.5, 0)


def test_reasoning_field_named_reasoning():
    body = {"choices": [{"message": {"content": "x", "reasoning": "r"}, "finish_reason": "stop"}]}
    [gen] = served([reply(body=body)]).generate([prompt()], SETTINGS)
    assert gen.text == "<think>r</think>x"


def test_an_answer_outside_the_format_is_quoted_by_its_last_80_characters():
    text = "a" * 20 + "b" * 80
    backend = served([reply(body=completion(text))], constrain="answer")
    with pytest.raises(RearankError, match=r"answered outside the format \('b{80}'\)"):
        backend.generate([PROMPT], SETTINGS)


@pytest.mark.parametrize(("status", "refused"), [(400, True), (422, True), (423, False)])
def test_a_grammar_refused_with_400_or_422_stops_the_run(status, refused):
    backend = served([reply(status, b"no")], max_retries=2)
    if refused:
        with pytest.raises(RearankError, match=rf"refused the structured-output request \(HTTP {status}: no\)"):
            backend._request(backend._payload(PROMPT, SETTINGS), GRAMMAR)
    else:
        assert backend._request(backend._payload(PROMPT, SETTINGS), GRAMMAR).finish_reason == "error"
    assert len(backend.seen) == 1


def test_a_body_of_exactly_the_cap_in_chunks_is_kept_whole():
    data = json.dumps(completion("chunked")).encode()
    chunks = [data[:10], data[10:20], data[20:]]
    [gen] = served([chunked(*chunks)], max_response_bytes=len(data)).generate([prompt()], SETTINGS)
    assert gen.text == "chunked"


def test_a_body_over_the_cap_is_a_final_failure(caplog):
    data = json.dumps(completion("ok")).encode()
    backend = served([reply(body=data)], max_response_bytes=len(data) - 1, max_retries=3)
    with caplog.at_level(logging.WARNING, logger="rearank.backends.openai"):
        [gen] = backend.generate([prompt()], SETTINGS)
    assert gen.finish_reason == "error" and len(backend.seen) == 1
    assert f"failed (response larger than {len(data) - 1} bytes)" in warning(caplog)


def test_a_reply_done_at_the_deadline_is_kept(monkeypatch):
    fake_clock(monkeypatch, perf=[0.0], mono=[0.0, 1.5])  # deadline 1.5: every later reading is the deadline itself
    data = json.dumps(completion("just in time")).encode()
    backend = served([chunked(data[:5], data[5:])], timeout_s=1.5, max_retries=0)
    assert backend.generate([prompt()], SETTINGS)[0].text == "just in time"


@pytest.mark.parametrize("late", [[0.0, 1.5, 1.5, 1.6], [0.0, 2.0]])  # done after the deadline; the first chunk
def test_a_reply_past_the_deadline_is_abandoned(monkeypatch, caplog, late):
    fake_clock(monkeypatch, perf=[0.0], mono=late)
    data = json.dumps(completion("late")).encode()
    backend = served([chunked(data[:5], data[5:])], timeout_s=1.5, max_retries=0)
    with caplog.at_level(logging.WARNING, logger="rearank.backends.openai"):
        [gen] = backend.generate([prompt()], SETTINGS)
    assert gen.finish_reason == "error"
    assert "failed (no complete response within 1.5s)" in warning(caplog)


def test_a_transport_timeout_is_the_same_failure(caplog):
    backend = served([httpx.ReadTimeout("slow")], timeout_s=2, max_retries=0)
    with caplog.at_level(logging.WARNING, logger="rearank.backends.openai"):
        [gen] = backend.generate([prompt()], SETTINGS)
    assert gen.finish_reason == "error"
    assert "failed (no complete response within 2s)" in warning(caplog)
