"""The MCP server (``rearank serve --mcp stdio|http``): agents call the reranker as tools.

Built on the official MCP Python SDK (2.x). Tools:

- ``rerank(query, documents, top_n)`` -> ``{results: [{index, relevance_score}], status}``, best first: the
  shape of Cohere, Jina, Voyage and TEI.
- ``search_and_rerank(query, k)``, when the server is given a corpus (a pack's docs or ``--corpus``): the BM25
  top ``depth`` of the corpus (:mod:`rearank.data.bm25`, Lucene), reranked; the best ``k`` with their ids and texts.

Both run through the rerank server's :class:`~rearank.server.app.RerankService`: the one engine (its feed), its
limits, and over HTTP its bearer key (checked on every request to ``/mcp``). Bad input is a tool error (the
call's ``isError`` with a one-line message, the HTTP routes' by the same contract,
:mod:`rearank.server.contract`), never a crash of the server.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field, ValidationError
from starlette.responses import JSONResponse

from rearank.api import rank_scores
from rearank.errors import RearankError
from rearank.server.app import Outcome, RerankService
from rearank.server.contract import Count, Document, QueryText, ServerError, error_body, invalid, one_line
from rearank.types import Candidate

#: Where the streamable HTTP transport answers.
MCP_PATH = "/mcp"
DEFAULT_DEPTH = 100


class Hit(BaseModel):
    """One reranked document: its position in the request's ``documents`` and a score that falls with rank."""

    index: int
    relevance_score: float


class RerankOutput(BaseModel):
    """``rerank``'s result: documents best first; ``status`` ok, or degraded (some windows kept their order)."""

    results: list[Hit]
    status: str
    message: str | None = None


class Found(BaseModel):
    """One corpus passage found and reranked."""

    docid: str
    title: str
    text: str
    relevance_score: float
    bm25_score: float


class SearchOutput(BaseModel):
    """``search_and_rerank``'s result: the best ``k`` passages of the corpus, best first."""

    results: list[Found]
    status: str
    message: str | None = None


class Searcher:
    """BM25 over a corpus (:class:`rearank.rag.retrieval.Corpus`): the top ``depth`` passages of a query, with texts.

    Lucene is called from one thread of its own (the JVM attaches it once), never from the event loop.
    """

    def __init__(self, corpus: Any, depth: int = DEFAULT_DEPTH) -> None:
        if depth < 1:
            raise RearankError(f"--search-depth must be at least 1, got {depth}")
        self.corpus, self.depth = corpus, depth
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rearank-bm25")

    @classmethod
    def open(cls, spec: str, depth: int = DEFAULT_DEPTH) -> Searcher:
        """Index (or reuse the index of) a corpus file, an index folder or a Pyserini prebuilt name."""
        from rearank.rag.retrieval import Corpus

        return cls(Corpus(spec, progress=False), depth)

    def _search(self, query: str) -> list[tuple[str, float, str, str]]:
        hits = self.corpus.search({"q": query}, self.depth).get("q", [])
        texts = self.corpus.docs(docid for docid, _ in hits)
        return [(docid, score, *texts[docid]) for docid, score in hits if docid in texts]

    async def search(self, query: str) -> list[tuple[str, float, str, str]]:
        """``(docid, bm25 score, title, text)`` of the top ``depth`` passages, best first."""
        return await asyncio.wrap_future(self._thread.submit(self._search, query))

    def close(self) -> None:
        """Stop the search thread."""
        self._thread.shutdown(wait=False)


async def _ranked(service: RerankService, query: str, candidates: tuple[Candidate, ...]) -> Outcome:
    """Rank through the service; its HTTP errors (limits, queue full, shutdown) and a failed backend are tool
    errors."""
    try:
        outcome = await service.rank(query, candidates)
    except ServerError as err:
        raise ToolError(err.message) from None
    if outcome.status == "backend_error":
        raise ToolError(f"{outcome.message.split(';')[0]}; retry, or check the server's log")
    return outcome


def _checked(service: RerankService, query: str, documents: list[str]) -> tuple[Candidate, ...]:
    try:
        return service.candidates(query, [Document(text=text) for text in documents])
    except ServerError as err:
        raise ToolError(err.message) from None


class _Contracted(MCPServer):
    """The SDK's server with its argument errors in the contract's one line (not pydantic's multi-line dump)."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        """Call tool ``name``; arguments that fail its schema are a tool error of one line."""
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as err:
            if type(err) is ToolError and isinstance(err.__cause__, ValidationError):
                raise ToolError(f"Error executing tool {name}: {invalid(one_line(err.__cause__)).message}") \
                    from err.__cause__
            raise


def create_mcp(service: RerankService, searcher: Searcher | None = None) -> MCPServer:
    """The MCP server over ``service``: ``rerank``, and ``search_and_rerank`` when a ``searcher`` is given."""
    method = service.reranker.method.name
    mcp = _Contracted("rearank", instructions=f"LLM reranking ({method}) with model {service.model_name!r}. "
                    + ("Use search_and_rerank to find passages in the served corpus; " if searcher else "")
                    + "use rerank to order documents you already have by relevance to a query.")

    @mcp.tool(description="Rank documents by relevance to a query with an LLM reranker. Returns results best "
              "first: index (the document's position in `documents`) and relevance_score (falls with rank).")
    async def rerank(query: Annotated[QueryText, Field(description="the query or question")],
                     documents: Annotated[list[str], Field(description="the texts to rank")],
                     top_n: Annotated[Count | None, Field(description="return only the best N")] = None,
                     ) -> RerankOutput:
        outcome = await _ranked(service, query, _checked(service, query, documents))
        hits = [Hit(index=i, relevance_score=s) for i, s in zip(outcome.order, rank_scores(len(outcome.order)))]
        return RerankOutput(results=hits[:top_n], status=outcome.status, message=outcome.message)

    if searcher is None:
        return mcp

    @mcp.tool(description=f"Search the served corpus with BM25 (top {searcher.depth}) and rerank the hits with "
              "an LLM reranker. Returns the best k passages: docid, title, text, relevance_score, bm25_score.")
    async def search_and_rerank(query: Annotated[QueryText, Field(description="the search query or question")],
                                k: Annotated[Count, Field(description="passages to return")] = 10,
                                ) -> SearchOutput:
        _checked(service, query, ["-"])  # the query's limit, before the search
        hits = await searcher.search(query)
        if not hits:
            return SearchOutput(results=[], status="ok", message="BM25 found no passage (no query term matches)")
        candidates = tuple(replace(c, score=score, title=title) for c, (_, score, title, _)
                           in zip(_checked(service, query, [text for *_, text in hits]), hits))
        outcome = await _ranked(service, query, candidates)
        found = [Found(docid=hits[i][0], title=hits[i][2], text=hits[i][3], relevance_score=s, bm25_score=hits[i][1])
                 for i, s in zip(outcome.order, rank_scores(len(outcome.order)))]
        return SearchOutput(results=found[:k], status=outcome.status, message=outcome.message)

    return mcp


class KeyCheck:
    """ASGI middleware: every HTTP request needs the service's bearer key (401 in the server's error shape)."""

    def __init__(self, app: Any, service: RerankService) -> None:
        self.app, self.service = app, service

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] == "http":
            header = dict(scope["headers"]).get(b"authorization")
            try:
                self.service.check_key(header.decode("latin-1") if header is not None else None)
            except ServerError as err:
                await JSONResponse(error_body(err.message, err.kind, err.status), err.status,
                                   headers=err.headers)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def http_app(mcp: MCPServer, service: RerankService, host: str = "127.0.0.1") -> KeyCheck:
    """The streamable HTTP app (at :data:`MCP_PATH`) behind the key check."""
    return KeyCheck(mcp.streamable_http_app(streamable_http_path=MCP_PATH, host=host), service)


def serve_stdio(mcp: MCPServer, service: RerankService) -> None:
    """Serve over this process's stdin and stdout until the client closes them."""
    service.feed.start()
    try:
        anyio.run(mcp.run_stdio_async)
    finally:
        service.feed.stop()


def serve_http(mcp: MCPServer, service: RerankService, host: str, port: int,
               on_bound: Callable[[str], None] = lambda url: None) -> None:
    """Serve streamable HTTP on ``host:port`` (0: a free port) until interrupted; ``on_bound`` gets the URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        raise RearankError(f"cannot listen on {host}:{port} ({err.strerror}); choose another --port") from None
    bound = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(http_app(mcp, service, host), log_level="info", lifespan="on"))
    service.feed.start()
    try:
        on_bound(f"http://{'[' + host + ']' if ':' in host else host}:{bound}{MCP_PATH}")
        server.run(sockets=[sock])
    finally:
        service.feed.stop()
        sock.close()
