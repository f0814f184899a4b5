"""A fake OpenAI-compatible chat-completions server whose service time follows a throughput model.

It measures clients (how many windows they keep in flight, how long they wait on rounds) without a GPU: answers
are deterministic ranking answers and the time each takes is simulated by :class:`Engine`, a discrete-event model
of an inference engine, on a clock that runs ``time_scale`` times faster than the wall clock.

Service models (:class:`ServiceModel`):

* ``batching``: continuous batching; a decode step gives every running sequence one token and costs
  ``t0 * (1 + alpha * b)`` for ``b`` running sequences, so throughput grows almost linearly with ``b``;
* ``flat``: one sequence at a time (others wait in a queue): concurrency does not help;
* ``degrading``: a step costs ``t0 * b * (1 + beta * (b - 1))``: total throughput falls as ``b`` grows.

A sequence joins at the next step boundary; its prefill (``prefill_s_per_token`` x prompt tokens) stalls that
step. Completion lengths are drawn per request, seeded by the request's content (order-independent):
``reasoning`` from a log-normal clipped to 100-2,000 tokens (the spread of the Rearank paper's Figure 6),
``answer`` about 4 tokens per passage. ``max_in_flight`` answers 429 with ``Retry-After`` beyond that many
requests (a hosted API's rate limit); with ``hold`` it keeps every answer until it has turned one request away, so
a test's client meets the limit however slowly its requests go out. Prompt tokens are counted as ``ceil(characters / 4) + 4`` a message
(no tokenizer).

Answers: ``presented`` ranks the passages ``[1] > … > [n]``; ``number`` ranks them by the first integer in each
passage, highest first (ties in presented order), so tests can tell a correct ranking from an echo. Passages
are the ``[i] text`` user turns (or ``[i] text`` lines of one turn for inline layouts).

Routes: ``POST /v1/chat/completions``, ``GET /v1/models``, ``GET /stats`` (:meth:`EngineStats.to_dict`),
``POST /stats/reset``. The JSON handling and payload shapes are those of :mod:`rearank.backends.chat_server`.

    python -m rearank.testing.fake_server --model batching --time-scale 200 --port 8001
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any

from rearank.backends.chat_server import JsonHandler, completion_body, error_body, models_body, serve_until_interrupted

MODELS = ("batching", "flat", "degrading")
LENGTHS = ("reasoning", "answer")
ANSWERS = ("presented", "number")
#: Reasoning lengths: log-normal around this median (tokens), clipped to [MIN, MAX].
REASONING_MEDIAN, REASONING_SIGMA, REASONING_MIN, REASONING_MAX = 500, 0.7, 100, 2000

_PASSAGE = re.compile(r"\[(\d+)\]\.?[ \t]?(.*)", re.DOTALL)
_LINE_PASSAGE = re.compile(r"(?m)^\[(\d+)\]\.?[ \t]?(.*)$")
_NUMBER = re.compile(r"\d+")


@dataclass(frozen=True)
class ServiceModel:
    """Step cost and capacity of a simulated engine (times in simulated seconds)."""

    kind: str = "batching"
    t0: float = 0.02  # one decode step of one sequence: 50 tokens/s
    alpha: float = 0.02  # batching: extra step cost per running sequence
    beta: float = 0.15  # degrading: throughput loss per extra sequence
    prefill_s_per_token: float = 0.00005  # 20,000 prompt tokens/s
    max_running: int = 256

    def __post_init__(self) -> None:
        if self.kind not in MODELS:
            raise ValueError(f"service model {self.kind!r}: expected one of {', '.join(MODELS)}")

    @property
    def capacity(self) -> int:
        """Most sequences running at once (the rest wait)."""
        return 1 if self.kind == "flat" else self.max_running

    def step_time(self, running: int) -> float:
        """Seconds of one decode step with ``running`` sequences (each gets one token)."""
        if self.kind == "degrading":
            return self.t0 * running * (1 + self.beta * (running - 1))
        return self.t0 * (1 + self.alpha * running)


def completion_length(kind: str, key: bytes, n_passages: int, seed: int = 0) -> int:
    """Tokens a request's completion takes, drawn from ``kind``'s distribution, seeded by ``key`` and ``seed``."""
    if kind == "answer":
        return 4 * n_passages + 2
    if kind != "reasoning":
        raise ValueError(f"completion lengths {kind!r}: expected one of {', '.join(LENGTHS)}")
    rng = random.Random(hashlib.sha256(seed.to_bytes(8, "big") + key).digest())
    draw = rng.lognormvariate(math.log(REASONING_MEDIAN), REASONING_SIGMA)
    return int(min(REASONING_MAX, max(REASONING_MIN, draw)))


@dataclass
class Sequence:
    """One request inside the engine."""

    prompt_tokens: int
    tokens: int  # completion tokens to generate
    done: threading.Event = field(default_factory=threading.Event)
    generated: int = 0
    submitted: float = 0.0
    finished: float = 0.0


@dataclass
class EngineStats:
    """What the engine did, in simulated seconds and tokens."""

    requests: int = 0
    rejected: int = 0  # answered 429
    prompt_tokens: int = 0
    completion_tokens: int = 0
    steps: int = 0
    busy_s: float = 0.0  # time with >= 1 sequence running
    sequence_s: float = 0.0  # integral of running sequences over time
    first_s: float | None = None
    last_s: float = 0.0
    max_running: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Counts plus ``occupancy`` (busy share of the span from first arrival to last completion) and
        ``mean_running`` (sequences running, averaged over that span) and ``tokens_per_s``."""
        span = self.last_s - self.first_s if self.first_s is not None else 0.0
        out: dict[str, Any] = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["span_s"] = span
        out["occupancy"] = self.busy_s / span if span > 0 else 0.0
        out["mean_running"] = self.sequence_s / span if span > 0 else 0.0
        out["mean_running_busy"] = self.sequence_s / self.busy_s if self.busy_s > 0 else 0.0
        out["completion_tokens_per_s"] = self.completion_tokens / span if span > 0 else 0.0
        return out


class Engine:
    """Discrete-event model of an inference engine: no clock of its own, driven by :meth:`submit`/:meth:`advance`."""

    def __init__(self, model: ServiceModel) -> None:
        self.model = model
        self.now = 0.0
        self.running: list[Sequence] = []
        self.waiting: deque[Sequence] = deque()
        self.stall = 0.0  # prefill time added to the next step
        self.stats = EngineStats()

    def submit(self, seq: Sequence, at: float) -> None:
        """Bring the engine to ``at`` and queue ``seq`` (it joins at the next step boundary)."""
        self.advance(at)
        seq.submitted = at
        self.stats.requests += 1
        self.stats.prompt_tokens += seq.prompt_tokens
        if self.stats.first_s is None:
            self.stats.first_s = at
        if not self.running and not self.waiting:
            self.now = max(self.now, at)
        self.waiting.append(seq)
        self._admit()

    def _admit(self) -> None:
        while self.waiting and len(self.running) < self.model.capacity:
            seq = self.waiting.popleft()
            self.stall += seq.prompt_tokens * self.model.prefill_s_per_token
            self.running.append(seq)
        self.stats.max_running = max(self.stats.max_running, len(self.running))

    def next_event(self) -> float | None:
        """When the next sequence finishes if nothing arrives; ``None`` when idle."""
        if not self.running:
            return None
        steps = min(s.tokens - s.generated for s in self.running)
        return self.now + self.stall + steps * self.model.step_time(len(self.running))

    def advance(self, to: float) -> list[Sequence]:
        """Run whole steps up to ``to``; return the sequences that finished (their ``done`` is set)."""
        finished: list[Sequence] = []
        while self.running:
            b = len(self.running)
            cost = self.model.step_time(b)
            left = min(s.tokens - s.generated for s in self.running)
            steps = min(left, int((to - self.now - self.stall) / cost + 1e-9)) if to - self.now >= self.stall else 0
            if steps <= 0:
                break
            elapsed = self.stall + steps * cost
            self.stall = 0.0
            self.now += elapsed
            self.stats.steps += steps
            self.stats.busy_s += elapsed
            self.stats.sequence_s += b * elapsed
            for seq in self.running:
                seq.generated += steps
            done = [s for s in self.running if s.generated >= s.tokens]
            if done:
                self.running = [s for s in self.running if s.generated < s.tokens]
                for seq in done:
                    seq.finished = self.now
                    self.stats.completion_tokens += seq.tokens
                    self.stats.last_s = self.now
                    seq.done.set()
                finished += done
                self._admit()
        if not self.running:
            self.now = max(self.now, to)
        return finished


def passages(messages: list[dict[str, Any]]) -> list[str]:
    """The ``[i] text`` passages of a chat prompt, in presented order (one per user turn, else one per line)."""
    users = [str(m.get("content", "")) for m in messages if m.get("role") == "user"]
    found = [m.group(2) for m in map(_PASSAGE.fullmatch, users) if m]
    if not found:
        found = [m.group(2) for text in users for m in _LINE_PASSAGE.finditer(text)]
    return found


def ranking(texts: list[str], answer: str) -> list[int]:
    """1-based ranking of ``texts`` for ``answer`` mode (see the module docstring)."""
    if answer == "presented":
        return list(range(1, len(texts) + 1))
    if answer != "number":
        raise ValueError(f"answer {answer!r}: expected one of {', '.join(ANSWERS)}")

    def key(i: int) -> tuple[int, int]:
        found = _NUMBER.search(texts[i])
        return (-int(found.group()) if found else 0, i)

    return [i + 1 for i in sorted(range(len(texts)), key=key)]


def prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """Tokens a prompt counts here: ``ceil(characters / 4) + 4`` a message."""
    return sum(-(-len(str(m.get("content", ""))) // 4) + 4 for m in messages)


class FakeServer(ThreadingHTTPServer):
    """The HTTP face: maps wall time to simulated time and wakes each request when its sequence finishes."""

    daemon_threads = True
    request_queue_size = 1024

    def __init__(self, model: ServiceModel | None = None, *, time_scale: float = 100.0, lengths: str = "reasoning",
                 answer: str = "presented", max_in_flight: int | None = None, retry_after_s: float = 1.0,
                 seed: int = 0, host: str = "127.0.0.1", port: int = 0, hold: bool = False) -> None:
        if lengths not in LENGTHS or answer not in ANSWERS:
            raise ValueError(f"lengths must be one of {LENGTHS}, answer one of {ANSWERS}")
        super().__init__((host, port), _Handler)
        self.model = model or ServiceModel()
        self.time_scale = time_scale
        self.lengths, self.answer, self.seed = lengths, answer, seed
        self.max_in_flight, self.retry_after_s = max_in_flight, retry_after_s
        self.cond = threading.Condition()
        self.in_flight = 0
        self.turned_away = threading.Event()  # set at the first 429 (answers wait for it with ``hold``)
        self.hold = hold
        self._stop = False
        self.reset()
        self._clock = threading.Thread(target=self._run_clock, daemon=True)
        self._clock.start()

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/v1"

    def reset(self) -> None:
        """Start a fresh engine and clock (the bench calls this between clients)."""
        with self.cond:
            self.engine = Engine(self.model)
            self.started = time.perf_counter()
            self.cond.notify_all()

    def sim_now(self) -> float:
        return (time.perf_counter() - self.started) * self.time_scale

    def _run_clock(self) -> None:
        with self.cond:
            while not self._stop:
                self.engine.advance(self.sim_now())
                nxt = self.engine.next_event()
                timeout = None if nxt is None else max(0.0, (nxt - self.sim_now()) / self.time_scale)
                self.cond.wait(timeout)

    def shutdown(self) -> None:
        with self.cond:
            self._stop = True
            self.cond.notify_all()
        super().shutdown()

    def complete(self, body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        """Serve one chat-completions body; returns status, JSON payload and extra headers."""
        messages = body.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            return 400, error_body("messages must be a list of objects"), {}
        max_tokens = body.get("max_tokens") or 2048
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            return 400, error_body("max_tokens must be a positive integer"), {}
        texts = passages(messages)
        key = json.dumps(messages, sort_keys=True).encode()
        want = completion_length(self.lengths, key, len(texts), self.seed)
        seq = Sequence(prompt_tokens(messages), max(1, min(want, max_tokens)))
        with self.cond:
            if self.max_in_flight is not None and self.in_flight >= self.max_in_flight:
                self.engine.stats.rejected += 1
                self.turned_away.set()
                return 429, error_body("rate limit"), {"Retry-After": f"{self.retry_after_s:g}"}
            self.in_flight += 1
            self.engine.submit(seq, self.sim_now())
            self.cond.notify_all()
        seq.done.wait()
        if self.hold:
            self.turned_away.wait()
        with self.cond:
            self.in_flight -= 1
        if want > max_tokens:
            text, reason = "<think>simulated reasoning, cut at max_tokens", "length"
        else:
            order = " > ".join(f"[{i}]" for i in ranking(texts, self.answer))
            text, reason = f"<think>{want} simulated reasoning tokens.</think>\n<answer>{order}</answer>", "stop"
        return 200, completion_body(body.get("model"), [(text, reason)], seq.prompt_tokens, seq.tokens), {}

    def stats(self) -> dict[str, Any]:
        with self.cond:
            self.engine.advance(self.sim_now())
            return {**self.engine.stats.to_dict(), "model": self.model.kind, "time_scale": self.time_scale}


class _Handler(JsonHandler):
    server: FakeServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: avoid the 40 ms delayed-ACK stall

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/stats":
            self._send(200, self.server.stats())
        elif self.path.rstrip("/") == "/v1/models":
            self._send(200, models_body("fake"))
        else:
            self._send(404, error_body(f"no route {self.path}"))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path.rstrip("/") == "/stats/reset":
            self.server.reset()
            self._send(200, {"reset": True})
            return
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, error_body(f"no route {self.path}"))
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._send(400, error_body("body is not JSON"))
            return
        if not isinstance(body, dict):
            self._send(400, error_body("body must be a JSON object"))
            return
        self._send(*self.server.complete(body))


def start(model: ServiceModel | str = "batching", **kwargs: Any) -> FakeServer:
    """Start a :class:`FakeServer` on 127.0.0.1 (a free port unless ``port`` is given) in a daemon thread."""
    server = FakeServer(ServiceModel(model) if isinstance(model, str) else model, **kwargs)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=MODELS, default="batching")
    parser.add_argument("--time-scale", type=float, default=100.0, help="simulated seconds per wall second")
    parser.add_argument("--lengths", choices=LENGTHS, default="reasoning")
    parser.add_argument("--answer", choices=ANSWERS, default="presented")
    parser.add_argument("--max-in-flight", type=int, default=None, help="answer 429 beyond this many requests")
    parser.add_argument("--port", type=int, default=8001)
    args = parser.parse_args(argv)
    server = FakeServer(ServiceModel(args.model), time_scale=args.time_scale, lengths=args.lengths,
                        answer=args.answer, max_in_flight=args.max_in_flight, port=args.port)
    return serve_until_interrupted(server, f"fake {args.model} server on {server.base_url} (stats: GET /stats)")


if __name__ == "__main__":
    raise SystemExit(main())
