"""OpenAI-compatible chat-completions client (vLLM ``serve``, SGLang, hosted APIs) over httpx.

The engine drives it one window per call from many threads (``calls = "concurrent"``), keeping ``concurrency``
windows in flight (``auto``: the engine finds the count); a list of prompts in one call runs in a pool of
``concurrency`` workers (8 for ``auto``). Each request always sends ``max_tokens``, has a
timeout, and is retried with exponential backoff on 429, 408, 5xx, timeouts and connection errors. A
window whose request still fails comes back as ``Generation(text="", finish_reason="error", error=...)``: the
driver keeps the input order for it and counts it, so a run always finishes (and says in the end how many failed,
and why the first did); each cause is warned about once, its repeats logged at info level.

The API key is read from the environment only and never logged: every message that could carry
server text is scrubbed of it first.
"""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from rearank.backends.base import (
    AUTO,
    CONCURRENT,
    ERROR,
    LENGTH,
    STOP,
    BackendBase,
    Generation,
    Prompt,
    SamplingSettings,
)
from rearank.backends.constrain import (
    LOGITS_PROCESSOR,
    STRUCTURED_OUTPUTS,
    check_constrain,
    fits,
    structured_output,
)
from rearank.backends.metrics import ServerLoad, metrics_url, parse_load
from rearank.backends.options import Option, check_options
from rearank.errors import RearankError
from rearank.grammar import AnswerGrammar

log = logging.getLogger(__name__)

#: The server ``vllm serve`` and ``python -m rearank.backends.chat_server`` start by default.
DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
_CHAT_PATH = "/chat/completions"
#: A chat completion of a few thousand tokens is tens of kilobytes; anything this large is a misbehaving server.
DEFAULT_MAX_RESPONSE_BYTES = 8 << 20


def chat_completions_url(base_url: str) -> str:
    """The chat-completions endpoint for ``base_url``.

    A trailing slash is ignored. A bare ``scheme://host[:port]`` gets ``/v1``; any other path is kept
    as given (``…/v1``, ``…/v1beta/openai``), and ``/chat/completions`` is appended unless already there.
    """
    parts = urlsplit(base_url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise RearankError(f"bad base URL {base_url!r}: expected http(s)://host[:port][/path], "
                           f"e.g. {DEFAULT_BASE_URL}")
    path = parts.path.rstrip("/") or "/v1"
    if not path.endswith(_CHAT_PATH):
        path += _CHAT_PATH
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def _retryable(status: int) -> bool:
    return status in (408, 429) or status >= 500


#: Workers of one ``generate`` call over many prompts when ``concurrency`` is ``auto``; also where the engine's
#: ``auto`` count starts (:class:`rearank.engine.concurrency.InFlightLimit`).
POOL_FOR_AUTO = 8


class OpenAIBackend(BackendBase):
    """Chat completions from an OpenAI-compatible server; ``model`` is the name the server serves.

    ``base_url``: default ``$OPENAI_BASE_URL``, else :data:`DEFAULT_BASE_URL` (see
    :func:`chat_completions_url`). ``api_key_env``: the environment variable holding the key
    (default ``OPENAI_API_KEY``, optional; a variable named explicitly must be set).
    ``timeout_s`` bounds each attempt as a whole (connecting, sending, and reading the whole reply): a reply still
    arriving after ``timeout_s``, however steadily it trickles, is abandoned at its next chunk, and no single wait
    exceeds ``timeout_s``, so an attempt never outlives twice ``timeout_s`` (a server that stalls just before the
    deadline). ``max_response_bytes`` caps a reply's (decoded) body. ``max_retries`` retries follow
    the first attempt, waiting ``backoff_s * 2**k`` (at most ``max_backoff_s``, longer if the server sends
    ``Retry-After``, never longer than ``max_backoff_s``). ``extra_body`` is merged into every request (e.g.
    ``{"chat_template_kwargs": {...}}`` for vLLM). ``enable_thinking`` (true/false) is sent as
    ``extra_body["chat_template_kwargs"]["enable_thinking"]``. Every option is checked against :attr:`OPTIONS`.
    ``constrain=answer`` sends each prompt's answer grammar as the server's structured-output request
    (``structured_output``: one of :data:`rearank.backends.constrain.STRUCTURED_OUTPUTS`, default ``vllm``); a
    server that refuses it, or answers outside the format, stops the run with a one-line error.
    ``max_think_tokens`` needs ``structured_output=rearank`` (a vLLM server running rearank's logits processor).
    """

    name = "openai"
    calls = CONCURRENT
    auto_start = POOL_FOR_AUTO
    OPTIONS = (
        Option("base_url", "str"), Option("api_key_env", "str"),
        Option("concurrency", "count", minimum=1, nullable=False),
        Option("timeout_s", "float", minimum=0, above_minimum=True, nullable=False),
        Option("max_retries", "int", minimum=0, nullable=False),
        Option("backoff_s", "float", minimum=0, nullable=False),
        Option("max_backoff_s", "float", minimum=0, nullable=False),
        Option("max_response_bytes", "int", minimum=1, nullable=False),
        Option("extra_body", "mapping"), Option("enable_thinking", "bool"),
        Option("structured_output", "str", nullable=False),
        Option("max_think_tokens", "int", minimum=0),
    )

    def __init__(self, model: str | None = None, *, base_url: str | None = None, api_key_env: str | None = None,
                 concurrency: int | str = AUTO, timeout_s: float = 600.0, max_retries: int = 4, backoff_s: float = 1.0,
                 max_backoff_s: float = 60.0, max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
                 extra_body: Mapping[str, Any] | None = None, enable_thinking: bool | None = None,
                 constrain: str | None = None, structured_output: str = "vllm",
                 max_think_tokens: int | None = None) -> None:
        import httpx

        if not model:
            raise RearankError("the openai backend needs --model: the model name the server serves "
                               "(listed by GET <base URL>/models)")
        given = {"base_url": base_url, "api_key_env": api_key_env, "concurrency": concurrency,
                 "timeout_s": timeout_s, "max_retries": max_retries, "backoff_s": backoff_s,
                 "max_backoff_s": max_backoff_s, "max_response_bytes": max_response_bytes, "extra_body": extra_body}
        check_options(self.name, self.OPTIONS, given)
        self.constrain = check_constrain(constrain, self.name)
        if structured_output not in STRUCTURED_OUTPUTS:
            raise RearankError(f"backend option structured_output={structured_output!r} (openai): choose one of "
                               f"{', '.join(STRUCTURED_OUTPUTS)}")
        if max_think_tokens is not None and structured_output != "rearank":
            raise RearankError("backend option max_think_tokens (openai) needs -O structured_output=rearank: a vLLM "
                               f"server started with --logits-processors {LOGITS_PROCESSOR}")
        self.structured_output, self.max_think_tokens = structured_output, max_think_tokens
        self.max_response_bytes = max_response_bytes
        self._sleep = time.sleep  # tests count the waits instead of timing them
        # 429/503 answers so far, and how many of this backend's requests the server held when it sent one (the
        # second fewest of the last 8: requests on their way in or out count as held, and one racy reading is not
        # trusted alone): read by the engine's in-flight controller as they come
        self.throttles, self.held_at_429, self._held = 0, None, deque(maxlen=8)
        self._active = self._retrying = 0  # requests in progress; of them, waiting to retry
        self._lock = threading.Lock()
        self._warned: set[str] = set()  # the causes of failed windows already warned about (the rest: info)
        self.model = model
        self.url = chat_completions_url(base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL)
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.extra_body = dict(extra_body or {})
        if enable_thinking is not None:
            kwargs = dict(self.extra_body.get("chat_template_kwargs") or {})
            self.extra_body["chat_template_kwargs"] = {**kwargs, "enable_thinking": bool(enable_thinking)}
        key = os.environ.get(api_key_env or DEFAULT_KEY_ENV, "")
        if api_key_env and not key:
            raise RearankError(f"environment variable {api_key_env} (the API key) is not set or empty")
        self._secrets = [key] if key else []
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._httpx = httpx
        connections = None if concurrency == AUTO else concurrency
        self._client = httpx.Client(headers=headers, timeout=httpx.Timeout(timeout_s),
                                    limits=httpx.Limits(max_connections=connections,
                                                        max_keepalive_connections=connections))

    def __repr__(self) -> str:
        return f"OpenAIBackend(model={self.model!r}, url={self.url!r})"

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def server_load(self) -> ServerLoad | None:
        """The server's load from its ``/metrics`` page (vLLM, SGLang), or None when it has none (hosted APIs,
        other servers) or it cannot be read within 5 s."""
        try:
            response = self._client.get(metrics_url(self.url), timeout=5.0)
        except self._httpx.HTTPError:
            return None
        return parse_load(response.text) if response.status_code == 200 else None

    def generate(self, prompts: Sequence[Prompt], settings: SamplingSettings) -> list[Generation]:
        """One request per prompt, ``concurrency`` at a time; failed ones come back with ``finish_reason="error"``."""
        if not prompts:
            return []
        payloads = [self._payload(p, settings) for p in prompts]
        grammars = [self._grammar(p) for p in prompts]
        if len(payloads) == 1:
            return [self._counted(payloads[0], grammars[0])]
        workers = POOL_FOR_AUTO if self.concurrency == AUTO else int(self.concurrency)
        with ThreadPoolExecutor(max_workers=min(workers, len(payloads))) as pool:
            return list(pool.map(self._counted, payloads, grammars))

    def _counted(self, payload: dict[str, Any], grammar: AnswerGrammar | None) -> Generation:
        with self._lock:
            self._active += 1
        try:
            return self._request(payload, grammar)
        finally:
            with self._lock:
                self._active -= 1

    def _wait(self, delay: float) -> None:
        """Wait before a retry, counted among the requests the server holds none of."""
        with self._lock:
            self._retrying += 1
        try:
            self._sleep(delay)
        finally:
            with self._lock:
                self._retrying -= 1

    def _grammar(self, prompt: Prompt) -> AnswerGrammar | None:
        """The answer grammar the server is asked to follow for ``prompt`` (None: none)."""
        return prompt.answer if self.constrain or self.max_think_tokens is not None else None

    def _payload(self, prompt: Prompt, settings: SamplingSettings) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": [dict(m) for m in prompt.messages],
                                "max_tokens": settings.max_new_tokens, "temperature": settings.temperature,
                                "top_p": settings.top_p}
        if settings.temperature > 0:
            body["seed"] = settings.seed
        body.update(self.extra_body)
        grammar = self._grammar(prompt)
        if grammar is not None:
            body.update(structured_output(self.structured_output, grammar, constrain=self.constrain,
                                          max_think_tokens=self.max_think_tokens,
                                          max_new_tokens=settings.max_new_tokens))
        return body

    def _refused(self, what: str) -> RearankError:
        return RearankError(f"-O constrain=answer (structured_output={self.structured_output}): the server at "
                            f"{self.url} {what}; use a server that supports it (vLLM: structured_output=vllm, or "
                            f"rearank with --logits-processors {LOGITS_PROCESSOR}; SGLang: sglang) or -O constrain=off")

    def _request(self, payload: dict[str, Any], grammar: AnswerGrammar | None = None) -> Generation:
        began = time.perf_counter()
        problem = ""
        wait_hint: float | None = None
        throttled = 0
        for attempt in range(self.max_retries + 1):
            if attempt:
                delay = self._backoff(attempt, wait_hint)
                log.info("openai backend: %s; retry %d/%d in %.2fs", problem, attempt, self.max_retries, delay)
                self._wait(delay)
            wait_hint = None
            try:
                status, headers, body = self._post(payload)
            except _Failure as failure:
                problem = self._scrub(str(failure))
                if failure.final:
                    break
                continue
            if status == 200:
                try:
                    generation = self._generation(_json(body), time.perf_counter() - began, throttled)
                except (ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError) as err:
                    problem = self._scrub(f"malformed response ({type(err).__name__}: {err})")
                    break
                if (self.constrain and grammar is not None and generation.finish_reason == STOP
                        and not fits(grammar, generation.text)):
                    raise self._refused(f"answered outside the format ({generation.text[-80:]!r})")
                return generation
            problem = self._scrub(f"HTTP {status}: {body[:300].decode('utf-8', errors='replace')}")
            if grammar is not None and status in (400, 422):
                raise self._refused(f"refused the structured-output request ({problem})")
            if not _retryable(status):
                break
            throttled += status in (429, 503)
            if status in (429, 503):
                with self._lock:
                    self.throttles += 1
                    self._held.append(self._active - self._retrying - 1)  # the others, less those waiting to retry
                    self.held_at_429 = sorted(self._held)[min(1, len(self._held) - 1)]
            wait_hint = _retry_after(headers.get("retry-after"))
        with self._lock:
            first = problem not in self._warned
            self._warned.add(problem)
        log.log(logging.WARNING if first else logging.INFO,  # one warning a cause: the run's summary counts them all
                "openai backend: request to %s failed (%s); the window keeps its input order", self.url, problem)
        return Generation(text="", prompt_tokens=0, completion_tokens=0, finish_reason=ERROR,
                          latency_s=time.perf_counter() - began, throttled=throttled,
                          error=f"request to {self.url} failed ({problem})")

    def _post(self, payload: dict[str, Any]) -> tuple[int, Any, bytes]:
        """One attempt: status, headers and the whole body, within ``timeout_s`` in all and ``max_response_bytes``."""
        httpx = self._httpx
        deadline = time.monotonic() + self.timeout_s
        late = _Failure(f"no complete response within {self.timeout_s:g}s")
        try:
            with self._client.stream("POST", self.url, json=payload) as response:
                chunks: list[bytes] = []
                size = 0
                for chunk in response.iter_bytes():  # decoded (gzip...): the cap holds for what we keep
                    size += len(chunk)
                    if size > self.max_response_bytes:
                        raise _Failure(f"response larger than {self.max_response_bytes} bytes", final=True)
                    chunks.append(chunk)
                    if time.monotonic() > deadline:
                        raise late
                if time.monotonic() > deadline:
                    raise late
                return response.status_code, response.headers, b"".join(chunks)
        except httpx.TimeoutException:
            raise late from None
        except (httpx.TransportError, httpx.StreamError) as err:
            raise _Failure(f"connection error ({type(err).__name__}: {err})") from None

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        delay = self.backoff_s * 2 ** (attempt - 1) * random.uniform(1.0, 1.25)
        if retry_after is not None:
            delay = max(delay, retry_after)
        return min(delay, self.max_backoff_s)

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _generation(self, data: dict[str, Any], latency: float, throttled: int) -> Generation:
        choice = data["choices"][0]
        message = choice.get("message") or {}
        text = message.get("content") or ""
        # Servers with a reasoning parser (vLLM, SGLang) return the thinking separately.
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        if reasoning:
            text = f"<think>{reasoning}</think>{text}"
        if not isinstance(text, str):
            raise TypeError(f"message content is {type(text).__name__}, not text")
        text = self._scrub(text)  # a server that echoes the key must not put it in the traces
        usage = data.get("usage") or {}
        return Generation(text=text, prompt_tokens=int(usage.get("prompt_tokens") or 0),
                          completion_tokens=int(usage.get("completion_tokens") or 0),
                          finish_reason=LENGTH if choice.get("finish_reason") == "length" else STOP,
                          latency_s=latency, throttled=throttled)


class _Failure(Exception):
    """An attempt that got no usable reply; ``final``: retrying cannot help."""

    def __init__(self, message: str, final: bool = False) -> None:
        super().__init__(message)
        self.final = final


def _json(body: bytes) -> Any:
    return json.loads(body.decode("utf-8"))


def _retry_after(value: str | None) -> float | None:
    """Seconds from a numeric ``Retry-After`` header (HTTP dates are ignored)."""
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None
