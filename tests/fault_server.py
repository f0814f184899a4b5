"""A deterministic, fault-injecting OpenAI-compatible server on 127.0.0.1 for tests (runs in a thread).

A good answer is a function of the prompt only (a permutation of the window's ``[i]`` ids drawn from a hash of
the messages, and token counts from their length), so a killed and resumed run must reproduce an uninterrupted
one exactly. ``faults`` maps request numbers (0-based, in arrival order) to a fault, or ``cycle`` repeats a list
of faults over all requests, or ``per_prompt`` gives the faults met by the 1st, 2nd, ... request of each distinct
chat (then a good answer): unlike arrival order, which concurrent clients make vary, this is the same on every run. ``gate_at`` holds request number N until :meth:`FaultServer.open_gate` (so a test
can kill its client at a known moment). A request asking for ``n`` completions gets ``n`` choices; ``answer``
replaces the good answer's text: a function of the messages and the choice's index (a reader's answer, a
BAR-RAG selection).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import socket
import threading
import time
from collections.abc import Callable
from http.server import ThreadingHTTPServer

from rearank.backends.chat_server import JsonHandler

#: Every fault the server can inject (``ok``: a good answer).
FAULTS = ("ok", "500", "429", "hang", "close_mid_body", "invalid_json", "empty_choices", "null_content",
          "oversized", "trickle", "echo_key")
_ID = re.compile(r"\[(\d+)\]")


def answer_for(messages: list[dict]) -> tuple[str, int, int]:
    """The deterministic good answer to a chat: ``(text, prompt_tokens, completion_tokens)``."""
    text = json.dumps(messages, sort_keys=True)
    n = max((int(i) for m in messages for i in _ID.findall(str(m.get("content", "")))), default=1)
    order = list(range(1, n + 1))
    random.Random(hashlib.sha256(text.encode()).hexdigest()).shuffle(order)
    answer = "<think>ok</think><answer>" + " > ".join(f"[{i}]" for i in order) + "</answer>"
    return answer, len(text.split()), 3 * n


class FaultServer(ThreadingHTTPServer):
    """The server; ``requests`` counts arrivals, ``served`` the faults actually sent (by name)."""

    daemon_threads = True

    def __init__(self, faults: dict[int, str] | None = None, cycle: list[str] | None = None,
                 gate_at: int | None = None, delay_s: float = 0.0, hang_s: float = 5.0,
                 oversized_bytes: int = 1 << 20, echo: str = "",
                 answer: Callable[[list[dict], int], str] | None = None, per_prompt: list[str] | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.answer = answer
        self.per_prompt = per_prompt
        self.attempts: dict[str, int] = {}
        self.faults = faults or {}
        self.cycle = cycle
        self.delay_s, self.hang_s, self.oversized_bytes, self.echo = delay_s, hang_s, oversized_bytes, echo
        self.requests = 0
        self.served: dict[str, int] = {}
        self.lock = threading.Lock()
        self.gate_at = gate_at
        self.gate = threading.Event()
        self.gate_reached = threading.Event()
        self.stopping = threading.Event()
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.gate.set()
        self.shutdown()
        self.server_close()

    def open_gate(self) -> None:
        self.gate.set()

    def next_fault(self, messages: list[dict]) -> tuple[int, str]:
        with self.lock:
            number = self.requests
            self.requests += 1
            if self.per_prompt is not None:
                key = json.dumps(messages, sort_keys=True)
                attempt = self.attempts[key] = self.attempts.get(key, -1) + 1
                fault = self.per_prompt[attempt] if attempt < len(self.per_prompt) else "ok"
            else:
                fault = self.cycle[number % len(self.cycle)] if self.cycle else self.faults.get(number, "ok")
            self.served[fault] = self.served.get(fault, 0) + 1
        return number, fault


class _Handler(JsonHandler):
    server: FaultServer
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        number, fault = self.server.next_fault(body["messages"])
        if self.server.gate_at is not None and number >= self.server.gate_at:
            self.server.gate_reached.set()
            self.server.gate.wait()
        if self.server.delay_s:
            time.sleep(self.server.delay_s)
        text, prompt_tokens, completion_tokens = answer_for(body["messages"])
        texts = [text if self.server.answer is None else self.server.answer(body["messages"], i)
                 for i in range(int(body.get("n") or 1))]
        good = {"choices": [{"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": "stop"}
                            for i, t in enumerate(texts)],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}}
        if fault == "500":
            self._send_raw(500, b'{"error": {"message": "internal"}}')
        elif fault == "429":
            self._send_raw(429, b'{"error": {"message": "slow down"}}', {"Retry-After": "0.01"})
        elif fault == "hang":
            self.server.stopping.wait(self.server.hang_s)
            self.close_connection = True
        elif fault == "close_mid_body":
            data = json.dumps(good).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
        elif fault == "invalid_json":
            self._send_raw(200, b'{"choices": [')
        elif fault == "empty_choices":
            self._send_raw(200, b'{"choices": []}')
        elif fault == "null_content":
            self._send_raw(200, json.dumps({"choices": [{"message": {"content": None}, "finish_reason": "stop"}]}).encode())
        elif fault == "oversized":
            filler = "x" * self.server.oversized_bytes
            self._send_raw(200, json.dumps({**good, "padding": filler}).encode())
        elif fault == "trickle":
            data = json.dumps(good).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            for i in range(0, len(data), 8):
                if self.server.stopping.wait(0.05):
                    break
                try:
                    self.wfile.write(data[i:i + 8])
                    self.wfile.flush()
                except OSError:
                    break
            self.close_connection = True
        elif fault == "echo_key":
            echoed = {**good, "choices": [{"index": 0, "message": {"role": "assistant",
                                                                   "content": f"{text} key={self.server.echo}"},
                                           "finish_reason": "stop"}]}
            self._send_raw(200, json.dumps(echoed).encode())
        else:
            self._send_raw(200, json.dumps(good).encode())

    def _send_raw(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
        try:
            super()._send_raw(status, data, headers)
        except OSError:
            self.close_connection = True
