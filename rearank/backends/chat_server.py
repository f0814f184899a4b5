"""A small OpenAI-compatible chat-completions server over any rearank backend.

``POST /v1/chat/completions`` (non-streaming; ``n`` completions a request) and ``GET /v1/models``, one request
at a time. It exists to test the ``openai`` backend end to end and to serve a local model to OpenAI clients; for
throughput use ``vllm serve`` or SGLang. Binds to 127.0.0.1 unless told otherwise. ``rearank serve``
(:mod:`rearank.server`) answers the same route through :func:`chat_completion` with its engine's
:meth:`~rearank.engine.Engine.call`, beside its rerank routes.

    python -m rearank.backends.chat_server --backend hf --model embedded --port 8000
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from rearank.backends.base import Backend, Generation, Prompt, SamplingSettings
from rearank.errors import RearankError

#: Most completions one request may ask for (``n``); each copy is generated as its own prompt in one batch.
MAX_N = 64
#: What answers a request: prompts and sampling settings -> one generation per prompt, in order.
Generate = Callable[[Sequence[Prompt], SamplingSettings], list[Generation]]


class ChatServer(ThreadingHTTPServer):
    """HTTP server holding the backend, the model name it answers to, and a lock serializing generation."""

    daemon_threads = True
    request_queue_size = 128  # clients send n-sample requests in bursts (reward loops, the BAR-RAG filter)

    def __init__(self, backend: Backend, model_name: str, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__((host, port), _Handler)
        self.backend = backend
        self.model_name = model_name
        self.lock = threading.Lock()

    def generate(self, prompts: Sequence[Prompt], settings: SamplingSettings) -> list[Generation]:
        """Generate with the backend, one request at a time."""
        with self.lock:
            return self.backend.generate(prompts, settings)

    @property
    def base_url(self) -> str:
        """``http://host:port/v1``, ready for the openai backend."""
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/v1"


class JsonHandler(BaseHTTPRequestHandler):
    """A quiet handler answering JSON: the base of this server's handler and of the test fake server's."""

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: the client reports failures."""

    def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        self._send_raw(status, json.dumps(payload).encode(), headers)

    def _send_raw(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
        """Answer ``data`` as the JSON body, as given (a test server may send broken JSON)."""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


class _Handler(JsonHandler):
    server: ChatServer

    def do_GET(self) -> None:
        if self.path.rstrip("/") != "/v1/models":
            self._send(404, error_body(f"no route {self.path}"))
            return
        self._send(200, models_body(self.server.model_name))

    def do_POST(self) -> None:
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send(404, error_body(f"no route {self.path}"))
            return
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        except ValueError as err:
            self._send(400, error_body(f"bad request: {err}"))
            return
        self._send(*chat_completion(self.server.generate, self.server.model_name, body))


def chat_completion(generate: Generate, model_name: str, body: Any) -> tuple[int, dict[str, Any]]:
    """Answer one chat-completions request body with ``generate``: the HTTP status and the JSON payload (shared
    with ``rearank serve``)."""
    try:
        if not isinstance(body, dict):
            raise TypeError("the body must be a JSON object")
        prompt, settings = _parse_request(body)
    except (ValueError, TypeError, KeyError) as err:
        return 400, error_body(f"bad request: {err}")
    if "model" not in body:
        return 400, error_body(f"bad request: 'model' is required; this server serves {model_name!r}")
    if body.get("stream"):
        return 400, error_body("bad request: streaming is not supported (each answer is one whole chat.completion); "
                               "send \"stream\": false or leave it out")
    if body.get("model") != model_name:
        return 404, error_body(f"the model {body.get('model')!r} does not exist; this server serves {model_name!r}")
    n = body.get("n", 1)
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_N:
        return 400, error_body(f"bad request: 'n' must be an integer in [1, {MAX_N}]")
    generations = generate([prompt] * n, settings)
    if any(g.finish_reason == "error" for g in generations):
        return 500, error_body("generation failed")
    choices = [(g.text, g.finish_reason) for g in generations]
    return 200, completion_body(model_name, choices, generations[0].prompt_tokens,
                                sum(g.completion_tokens for g in generations))


def completion_body(model: Any, choices: list[tuple[str, str]], prompt_tokens: int,
                    completion_tokens: int) -> dict[str, Any]:
    """A ``chat.completion`` payload: one choice a ``(text, finish_reason)``, with the usage counts."""
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
        "model": model,
        "choices": [{"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": reason}
                    for i, (text, reason) in enumerate(choices)],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


def models_body(model: str) -> dict[str, Any]:
    """The ``GET /v1/models`` payload listing one model."""
    return {"object": "list", "data": [{"id": model, "object": "model"}]}


def _parse_request(body: dict[str, Any]) -> tuple[Prompt, SamplingSettings]:
    messages = body["messages"]
    if not isinstance(messages, list) or not all(isinstance(m, dict) and "role" in m for m in messages):
        raise ValueError("'messages' must be a list of {role, content} objects")
    defaults = SamplingSettings()
    settings = SamplingSettings(
        max_new_tokens=int(body.get("max_tokens") or defaults.max_new_tokens),
        temperature=float(body.get("temperature", defaults.temperature)),
        top_p=float(body.get("top_p", defaults.top_p)),
        seed=int(body.get("seed", defaults.seed)),
    )
    return Prompt(messages=tuple({"role": m["role"], "content": m.get("content") or ""} for m in messages)), settings


def error_body(message: str) -> dict[str, Any]:
    """An OpenAI-style error payload."""
    return {"error": {"message": message}}


def serve_until_interrupted(server: ThreadingHTTPServer, banner: str) -> int:
    """Print ``banner``, serve until Ctrl-C, close the socket; the exit status 0 (for ``main``)."""
    print(banner, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Serve a backend until interrupted."""
    from rearank.backends.registry import BACKENDS, make_backend

    parser = argparse.ArgumentParser(prog="python -m rearank.backends.chat_server", description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="hf", choices=[b for b in BACKENDS if b != "oracle"])
    parser.add_argument("--model", default="embedded", help="hub id, local folder, .gguf file, or 'embedded'")
    parser.add_argument("--served-name", help="name clients send as 'model' (default: --model)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    try:
        backend = make_backend(args.backend, args.model)
    except RearankError as err:
        print(f"rearank.backends.chat_server: error: {err}", file=sys.stderr)
        return 2
    server = ChatServer(backend, args.served_name or args.model, args.host, args.port)
    return serve_until_interrupted(server, f"serving {args.model!r} at {server.base_url}")


if __name__ == "__main__":
    raise SystemExit(main())
