"""The reader a BAR-RAG selector reward asks: chat completions behind an OpenAI-compatible URL, ``n`` samples a call.

The URL is the reward option ``reader_url`` (a base URL such as ``http://127.0.0.1:8000/v1``: ``vllm serve``,
``python -m rearank.backends.chat_server``), else the address of verl's reward-model router, which verl hands an
async reward as ``reward_router_address`` when ``reward.reward_model.enable`` is set (the router forwards
``/v1/chat/completions`` to its vLLM servers). Any failure -- connection, timeout, HTTP status, a body that is
not a completion with ``n`` choices -- raises :class:`ReaderError`; the reward turns it into its failure score.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import Sequence
from typing import Any

import httpx

from rearank.backends.openai import chat_completions_url
from rearank.errors import RearankError


class ReaderError(RearankError):
    """The reader did not return ``n`` completions."""


def reader_endpoint(reader_url: str | None, router_address: str | None) -> str:
    """The chat-completions URL: ``reader_url`` if given, else verl's router (``host:port``); else ValueError."""
    if reader_url:
        return chat_completions_url(reader_url)
    if router_address:
        address = router_address if "://" in router_address else f"http://{router_address}"
        return chat_completions_url(address)
    raise ValueError("the BAR-RAG selector reward needs a reader: set reward_kwargs.reader_url (e.g. "
                     "http://127.0.0.1:8000/v1) or enable verl's reward model (reward.reward_model.enable=true)")


async def sample_reader(
    url: str, model: str, messages: Sequence[dict], n: int, *, temperature: float = 1.0, max_tokens: int = 1024,
    timeout_s: float = 120.0, max_retries: int = 3, api_key_env: str = "OPENAI_API_KEY",
) -> list[str]:
    """``n`` completions of one chat in one request (``n=K``); raises :class:`ReaderError` on any failure.

    Connection errors, timeouts, 408, 429 and 5xx are retried ``max_retries`` times (backoff 0.5 s, 1 s, 2 s, ...).
    One HTTP client per event loop is kept open and reused.
    """
    payload = {"model": model, "messages": list(messages), "n": n, "temperature": temperature,
               "max_tokens": max_tokens}
    key = os.environ.get(api_key_env)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    client = _client()
    problem = ""
    for attempt in range(max_retries + 1):
        if attempt:
            await asyncio.sleep(0.5 * 2 ** (attempt - 1))
        try:
            response = await client.post(url, json=payload, headers=headers, timeout=timeout_s)
        except httpx.HTTPError as err:
            problem = f"unreachable: {type(err).__name__}"
            continue
        if response.status_code == 200:
            try:
                return _texts(response.json(), n)
            except (ValueError, TypeError, KeyError, AttributeError) as err:
                raise ReaderError(f"reader at {url} sent a malformed completion ({err})") from None
        problem = f"answered HTTP {response.status_code}"
        if response.status_code not in (408, 429) and response.status_code < 500:
            break
    raise ReaderError(f"reader at {url} {problem}")


_CLIENTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _client() -> httpx.AsyncClient:
    """The running event loop's shared client (verl's reward loop and the filter each run one loop)."""
    loop = asyncio.get_running_loop()
    client = _CLIENTS.get(loop)
    if client is None or client.is_closed:
        client = _CLIENTS[loop] = httpx.AsyncClient(limits=httpx.Limits(max_connections=256))
    return client


def _texts(body: Any, n: int) -> list[str]:
    choices = body["choices"]
    if not isinstance(choices, list) or len(choices) != n:
        raise ValueError(f"expected {n} choices, got {len(choices) if isinstance(choices, list) else choices!r}")
    texts = [choice["message"]["content"] for choice in choices]
    if not all(isinstance(t, str) for t in texts):
        raise ValueError("a choice has no text content")
    return texts
