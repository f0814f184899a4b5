"""The rerank server's FastAPI app: the Jina, Cohere v2 and chat-completions shapes over one :class:`Reranker`.

Routes: ``POST /v1/rerank`` and ``POST /rerank`` (Jina shape, as vLLM's), ``POST /v2/rerank`` (Cohere v2),
``POST /v1/chat/completions`` (the chat schema of :mod:`rearank.backends.chat_server`), ``GET /health``,
``GET /v1/models``. Scores and the ``rearank`` extension field are described in docs/serving.md. Every route reads
its request by the one contract of :mod:`rearank.server.contract` (the MCP tools too) and answers errors in its
shape.
"""

from __future__ import annotations

import asyncio
import hmac
import itertools
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from rearank.api import Ranking, Reranker, rank_scores
from rearank.backends.chat_server import chat_completion
from rearank.errors import RearankError
from rearank.server.contract import (
    ChatRequest,
    CohereRequest,
    Document,
    Extension,
    JinaRequest,
    ServerError,
    error_body,
    fusion_weight,
    invalid,
    parse,
)
from rearank.server.feed import Feed, Overloaded
from rearank.types import Candidate, Query
from rearank.types import Request as RerankRequest


@dataclass(frozen=True)
class Limits:
    """Request limits: over them a request gets 413 (body, documents, characters) before any work is queued."""

    max_documents: int = 1000
    max_document_chars: int = 20_000
    max_query_chars: int = 10_000
    max_body_bytes: int = 8 * 1024 * 1024


@dataclass
class Outcome:
    """What a rerank produced: the final order (input positions), the ranking if any, and the status."""

    order: list[int]
    ranking: Ranking | None
    status: str  # ok | degraded (some windows failed) | backend_error (input order kept)
    message: str | None = None


def fused_order(order: list[int], first_stage: list[float], alpha: float) -> list[int]:
    """Order by ``alpha * rank_score + (1 - alpha) * minmax(first_stage)``; ties keep the reranked order."""
    n = len(order)
    low, high = min(first_stage), max(first_stage)
    norm = [(s - low) / (high - low) if high > low else 0.0 for s in first_stage]
    score = {index: alpha * r + (1 - alpha) * norm[index] for index, r in zip(order, rank_scores(n))}
    rank = {index: r for r, index in enumerate(order)}
    return sorted(order, key=lambda i: (-score[i], rank[i]))


class RerankService:
    """The state behind the routes: the reranker, the feed running its engine, limits, key and (for the oracle)
    the judge."""

    def __init__(self, reranker: Reranker, *, model_name: str, limits: Limits | None = None,
                 api_key: str | None = None, capacity: int = 256,
                 judge: Any | None = None, fusion_weight: float | None = None) -> None:
        self.reranker = reranker
        self.model_name = model_name
        self.limits = limits or Limits()
        self._key = api_key.encode() if api_key else None
        self.judge = judge
        self.fusion_weight = fusion_weight
        self.feed = Feed(reranker.engine, capacity=capacity)
        self._ids = itertools.count()

    def check_key(self, header: str | None) -> None:
        """401 unless the bearer token equals the key (constant-time comparison); no key configured: open."""
        if self._key is None:
            return
        scheme, _, token = (header or "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), self._key):
            raise ServerError(401, "missing or invalid API key: send 'Authorization: Bearer <key>'",
                              "unauthorized", {"WWW-Authenticate": "Bearer"})

    async def body(self, request: Request) -> bytes:
        """The request body; 413 when its declared length or the bytes streamed so far (a chunked body) pass the
        size limit, so no more than the limit is ever held."""
        limit = self.limits.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise ServerError(413, f"request body of {declared} bytes is over the limit of {limit} bytes",
                              "too_large")
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                raise ServerError(413, f"request body is over the limit of {limit} bytes", "too_large")
        return bytes(body)

    async def read(self, request: Request, model: type[BaseModel]) -> Any:
        """Read the body (413 past the size limit), parse and validate it by the contract (422,
        :mod:`rearank.server.contract`), check the model name (404)."""
        parsed = parse(model, await self.body(request))
        if getattr(parsed, "model", None) not in (None, self.model_name):
            raise ServerError(404, f"the model {parsed.model!r} does not exist; this server serves "
                              f"{self.model_name!r}", "model_not_found")
        return parsed

    def candidates(self, query: str, documents: list[Document]) -> tuple[Candidate, ...]:
        """Check the limits (413) and build candidates: docid = position, score = given or ``n - position``."""
        lim = self.limits
        if not documents:
            raise invalid("documents: give at least one document")
        if len(documents) > lim.max_documents:
            raise ServerError(413, f"{len(documents)} documents is over the limit of {lim.max_documents} "
                              "per request", "too_large")
        if len(query) > lim.max_query_chars:
            raise ServerError(413, f"the query has {len(query)} characters, over the limit of "
                              f"{lim.max_query_chars}", "too_large")
        n = len(documents)
        out = []
        for i, doc in enumerate(documents):
            text, score = doc.text, doc.score
            if len(text) > lim.max_document_chars:
                raise ServerError(413, f"document {i} has {len(text)} characters, over the limit of "
                                  f"{lim.max_document_chars}", "too_large")
            out.append(Candidate(str(i), float(n - i) if score is None else score, text))
        return tuple(out)

    async def rerank(self, query: str, documents: list[Document], extension: Extension) -> Outcome:
        """Check and rank one request's documents, fused with their first-stage scores when it asks."""
        candidates = self.candidates(query, documents)
        alpha = fusion_weight(documents, extension.fusion_weight, self.fusion_weight)
        outcome = await self.rank(query, candidates)
        if alpha is not None:
            outcome.order = fused_order(outcome.order, [c.score for c in candidates], alpha)
        return outcome

    async def rank(self, query: str, candidates: tuple[Candidate, ...]) -> Outcome:
        """Queue one query (429 when full) and wait for its ranking; a backend failure keeps the input order.

        ``candidates`` have docids ``"0"``, ``"1"``, ... (their positions), as :meth:`candidates` builds them.
        """
        qid = f"req-{next(self._ids)}"
        if self.judge is not None:
            self.judge.register(qid, query, [c.text for c in candidates])
        loop = asyncio.get_running_loop()
        future: asyncio.Future[tuple[Ranking | None, str | None]] = loop.create_future()

        def done(ranking: Ranking | None, error: str | None) -> None:
            loop.call_soon_threadsafe(_resolve, future, (ranking, error))

        try:
            try:
                self.feed.submit(RerankRequest(Query(qid, query), candidates), done)
            except Overloaded as err:
                raise ServerError(429, str(err), "overloaded", {"Retry-After": str(err.retry_after)}) from None
            except RearankError as err:
                raise ServerError(503, str(err), "unavailable") from None
            ranking, error = await future
        finally:
            if self.judge is not None:
                self.judge.release(qid)
        n = len(candidates)
        if ranking is None:
            outcome = Outcome(list(range(n)), None, "backend_error",
                              f"{error}; the documents keep their input order")
        elif ranking.failed_windows:
            outcome = Outcome(ranking.order, ranking, "degraded",
                              f"{ranking.failed_windows} of {len(ranking.traces)} windows failed in the backend "
                              "and kept their input order")
        else:
            outcome = Outcome(ranking.order, ranking, "ok")
        return outcome

    def extension(self, outcome: Outcome) -> dict[str, Any]:
        """The ``rearank`` field: status, method, calls, tokens, the full order and every window's reasoning."""
        traces = outcome.ranking.traces if outcome.ranking else ()
        ext: dict[str, Any] = {
            "status": outcome.status, "method": self.reranker.method.name, "order": outcome.order,
            "calls": len(traces), "failed_windows": outcome.ranking.failed_windows if outcome.ranking else None,
            "prompt_tokens": sum(t.prompt_tokens for t in traces),
            "completion_tokens": sum(t.completion_tokens for t in traces),
            "windows": [{"start": t.start, "end": t.end, "pass": t.pass_index, "round": t.round,
                         "partition": t.partition, "status": t.status,
                         "permutation": list(t.permutation), "reasoning": t.raw_output} for t in traces],
        }
        if outcome.message:
            ext["message"] = outcome.message
        return ext


def _resolve(future: asyncio.Future, value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _results(outcome: Outcome, documents: list[Document], top_n: int | None,
             with_documents: bool) -> list[dict[str, Any]]:
    scores = rank_scores(len(outcome.order))
    results = []
    for index, score in list(zip(outcome.order, scores))[:top_n]:
        item: dict[str, Any] = {"index": index, "relevance_score": score}
        if with_documents:
            item["document"] = {"text": documents[index].text}
        results.append(item)
    return results


def create_app(service: RerankService) -> FastAPI:
    """The FastAPI app over ``service``; its lifespan starts and stops the feed's worker."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        service.feed.start()
        try:
            yield
        finally:
            await run_in_threadpool(service.feed.stop)

    app = FastAPI(title="rearank", summary="LLM reranking: Jina, Cohere v2 and chat-completions shapes",
                  lifespan=lifespan)
    app.state.service = service

    @app.exception_handler(ServerError)
    async def _server_error(_request: Request, err: ServerError) -> JSONResponse:
        return JSONResponse(error_body(err.message, err.kind, err.status), err.status, headers=err.headers)

    def guarded(route: Callable[..., Any]) -> Callable[..., Any]:
        async def handler(request: Request) -> Any:
            service.check_key(request.headers.get("authorization"))
            return await route(request)
        handler.__name__ = route.__name__
        handler.__doc__ = route.__doc__
        return handler

    async def jina(request: Request) -> dict[str, Any]:
        """Rerank (Jina / vLLM shape): results sorted by relevance_score, which decreases with rank."""
        body: JinaRequest = await service.read(request, JinaRequest)
        outcome = await service.rerank(body.query, body.documents, body.rearank)
        ext = service.extension(outcome)
        return {"id": f"rerank-{uuid.uuid4().hex}", "model": service.model_name,
                "usage": {"total_tokens": ext["prompt_tokens"] + ext["completion_tokens"]},
                "results": _results(outcome, body.documents, body.top_n, body.return_documents), "rearank": ext}

    async def cohere(request: Request) -> dict[str, Any]:
        """Rerank (Cohere v2 shape)."""
        body: CohereRequest = await service.read(request, CohereRequest)
        outcome = await service.rerank(body.query, body.documents, body.rearank)
        ext = service.extension(outcome)
        return {"id": str(uuid.uuid4()), "results": _results(outcome, body.documents, body.top_n, False),
                "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1},
                         "tokens": {"input_tokens": ext["prompt_tokens"], "output_tokens": ext["completion_tokens"]}},
                "rearank": ext}

    async def chat(request: Request) -> JSONResponse:
        """Chat completions (non-streaming), generated through the reranker's engine between its own calls."""
        body: ChatRequest = await service.read(request, ChatRequest)
        status, payload = await run_in_threadpool(chat_completion, service.reranker.engine.call, service.model_name,
                                                  body.checked())
        if status != 200:
            raise ServerError(status, payload["error"]["message"], "backend_error" if status >= 500
                              else "invalid_request")
        return JSONResponse(payload, status)

    async def models(_request: Request) -> dict[str, Any]:
        """The one model served."""
        return {"object": "list", "data": [{"id": service.model_name, "object": "model", "owned_by": "rearank"}]}

    for path in ("/v1/rerank", "/rerank"):
        app.add_api_route(path, guarded(jina), methods=["POST"])
    app.add_api_route("/v2/rerank", guarded(cohere), methods=["POST"])
    app.add_api_route("/v1/chat/completions", guarded(chat), methods=["POST"])
    app.add_api_route("/v1/models", guarded(models), methods=["GET"])

    @app.get("/health")
    async def health() -> dict[str, Any]:
        """Liveness and queue state (no key needed)."""
        feed = service.feed
        return {"status": "ok", "model": service.model_name, "method": service.reranker.method.name,
                "reasoning": getattr(service.reranker.method, "reasoning", None),
                "backend": getattr(service.reranker.backend, "name", "?"),
                "queue": {"load": feed.load, "capacity": feed.capacity, "calls": feed.calls}}

    return app


@contextmanager
def serve_in_thread(service: RerankService, host: str = "127.0.0.1", port: int = 0,
                    start_timeout_s: float = 30.0) -> Iterator[str]:
    """Serve ``service`` with uvicorn in a background thread (a notebook, a test, a benchmark); yield the base URL.

    ``port=0`` picks a free port. The server (and its feed's worker) stops when the block ends.
    """
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((host, port))
    bound = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(service), log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="rearank-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    if not server.started:
        server.should_exit = True
        sock.close()
        raise RearankError(f"the server did not start on {host}:{bound}")
    try:
        yield f"http://{host}:{bound}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
