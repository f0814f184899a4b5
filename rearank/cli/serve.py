"""``rearank serve``: a rerank server (Jina/vLLM ``/v1/rerank``, Cohere ``/v2/rerank``, chat completions)."""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from rearank.backends.registry import declared, rerank_backends
from rearank.data import packs
from rearank.errors import RearankError
from rearank.flags import add_reasoning_argument, backend_options
from rearank.io.outputs import reads
from rearank.methods import METHODS

if TYPE_CHECKING:
    from rearank.server import RerankService


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``serve`` subcommand."""
    p = subparsers.add_parser(
        "serve",
        help="serve a reranker over HTTP (/v1/rerank, /v2/rerank, chat completions)",
        description="Serve a reranker over HTTP in the shapes RAG frameworks send: POST /v1/rerank and /rerank "
        "(Jina / vLLM), POST /v2/rerank (Cohere v2), POST /v1/chat/completions, GET /health, GET /v1/models. "
        "Every request's windows go into one running engine: concurrent requests share backend calls, and a small "
        "request is answered without waiting for a large one. See docs/serving.md.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    model = p.add_argument_group("model")
    model.add_argument("--backend", choices=rerank_backends(), default="hf",
                       help="generation backend (or one an installed package registers: entry points rearank.backends)")
    model.add_argument("--model", help="hub id, local folder, .gguf or 'embedded' (hf, vllm); the served model "
                       "name for openai (fronting a `vllm serve`/SGLang deployment, with -O base_url=...)")
    model.add_argument("--method", choices=list(METHODS), default="listwise",
                       help="reranking method (or one an installed package registers: entry points rearank.cards)")
    model.add_argument("--option", "-O", action="append", default=[], metavar="KEY=VALUE",
                       help="any option of rearank.Reranker, repeatable: method (window=20, step=10, group_size=20), "
                       "sampling (max_new_tokens=1024, temperature=0), reranking (top_k=100, batch_size=32), or "
                       "backend (device=cuda, tensor_parallel_size=2, base_url=http://host:8000/v1)")
    add_reasoning_argument(model)
    model.add_argument("--served-name", help="the model name clients send (default: --model, or the backend)")
    oracle = p.add_argument_group("oracle backend (ranks by judgments; documents and queries matched by text)")
    oracle.add_argument("--dataset", help="pack whose topics, docs and qrels judge the requests")
    reads(oracle.add_argument("--qrels", help="qrels file (with --topics and --docs)"))
    reads(oracle.add_argument("--topics", help="topics: 'qid TAB text' TSV or BEIR queries.jsonl"))
    reads(oracle.add_argument("--docs", help="docs: 'docid TAB text' TSV or BEIR corpus.jsonl"))
    http = p.add_argument_group("HTTP")
    http.add_argument("--host", default="127.0.0.1", help="address to bind (0.0.0.0 to listen on all)")
    http.add_argument("--port", type=int, default=8000, help="port to bind (0: one the OS picks, named in the "
                      "'serving ... at' line)")
    http.add_argument("--fd", type=int, metavar="N", help="serve on the listening socket inherited as file "
                      "descriptor N instead of binding --host/--port (socket activation; tests pass a port-0 socket)")
    http.add_argument("--api-key-env", metavar="NAME",
                      help="require 'Authorization: Bearer <key>' with the key read from this environment variable")
    http.add_argument("--queue-size", type=int, default=256, help="queries queued or running before 429")
    http.add_argument("--max-documents", type=int, default=1000, help="documents per request (413 above)")
    http.add_argument("--max-document-chars", type=int, default=20_000, help="characters per document (413 above)")
    http.add_argument("--max-body-bytes", type=int, default=8 * 1024 * 1024, help="request body size (413 above)")
    http.add_argument("--max-query-chars", type=int, default=10_000, help="characters of the query (413 above)")
    http.add_argument("--fusion-weight", type=float, help="default weight of the rank score fused with documents' "
                      "first-stage scores when a request gives them (requests override it)")
    mcp = p.add_argument_group("MCP (tools for agents; see docs/serving.md)")
    mcp.add_argument("--mcp", choices=("stdio", "http"),
                     help="serve MCP tools instead of the HTTP routes: stdio (an agent starts this command and talks "
                     "over its stdin/stdout) or http (streamable HTTP at /mcp on --host/--port, with --api-key-env)")
    reads(mcp.add_argument("--corpus", metavar="SPEC", help="corpus of the search_and_rerank tool: BEIR corpus.jsonl, "
                     "'docid TAB text' TSV, Lucene index folder or Pyserini prebuilt index (default with --dataset: "
                     "the pack's docs)"))
    mcp.add_argument("--search-depth", type=int, default=100, metavar="N",
                     help="BM25 passages that search_and_rerank reranks")
    p.set_defaults(func=run)


#: The flags of the request limits (:class:`rearank.server.Limits` fields of the same names).
LIMIT_FLAGS = ("max_documents", "max_document_chars", "max_query_chars", "max_body_bytes")


def check_args(args: argparse.Namespace) -> None:
    """Every flag of ``serve`` checked in one place, before a socket, a model or a corpus is opened."""
    if not 0 <= args.port <= 65535:
        raise RearankError(f"--port must be between 0 (one the OS picks) and 65535, got {args.port}")
    if args.fd is not None and args.fd < 0:
        raise RearankError(f"--fd must be an open file descriptor (0 or more), got {args.fd}")
    for name in ("queue_size", *LIMIT_FLAGS, "search_depth"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise RearankError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if args.mcp and args.search_depth > args.max_documents:
        raise RearankError(f"--search-depth {args.search_depth} is over --max-documents {args.max_documents}")
    if args.fusion_weight is not None and not 0 <= args.fusion_weight <= 1:
        raise RearankError(f"--fusion-weight must be between 0 and 1, got {args.fusion_weight}")


def run(args: argparse.Namespace) -> int:
    """Build the reranker and serve it (HTTP routes, or MCP tools with ``--mcp``) until interrupted."""
    check_args(args)
    try:
        import uvicorn

        from rearank.server import create_app
    except ImportError as err:
        raise RearankError(f"the server needs FastAPI and uvicorn ({err}); pip install 'rearank[serve]'") from None
    if args.mcp:
        _mcp_available()
    inherited = _listening(args.fd) if args.fd is not None else None  # checked before the model loads
    # over stdio, stdout is the protocol's: whatever loading prints goes to stderr
    with _stdout_to_stderr() if args.mcp == "stdio" else contextlib.nullcontext():
        service = build_service(args)
        searcher = _searcher(args) if args.mcp else None
    name, key = service.model_name, args.api_key_env
    try:
        if args.mcp:
            _serve_mcp(args, service, searcher, keyed=bool(key))
            return 0
        config = uvicorn.Config(create_app(service), host=args.host, port=args.port, log_level="info")
        sock = inherited or config.bind_socket()
        sock.listen(config.backlog)  # from here a connection waits in the backlog: the line below can be acted on
        host, port = sock.getsockname()[:2]
        with contextlib.suppress(OSError):  # a log that cannot be written (stderr on a full disk) must not stop
            print(f"serving {name!r} ({args.method}, {args.backend}) at "
                  f"http://{f'[{host}]' if ':' in host else host}:{port}"
                  + (" (bearer key required)" if key else ""), file=sys.stderr, flush=True)
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        service.reranker.close()
        if searcher is not None:
            searcher.close()
    return 0


def build_service(args: argparse.Namespace) -> RerankService:
    """The :class:`rearank.server.RerankService` of the flags: the reranker, the key, the queue and the limits."""
    try:
        from rearank.api import Reranker
        from rearank.server import Limits, RerankService, TextJudge
    except ImportError as err:
        raise RearankError(f"the server needs FastAPI and uvicorn ({err}); pip install 'rearank[serve]'") from None
    if args.mcp is None and args.corpus:
        raise RearankError("--corpus is the corpus of the MCP search_and_rerank tool: add --mcp stdio or --mcp http")
    if args.mcp == "stdio" and args.api_key_env:
        raise RearankError("--api-key-env guards HTTP; over --mcp stdio the agent that started the server is its "
                           "only client: drop it, or use --mcp http")
    key = None
    if args.api_key_env:
        key = os.environ.get(args.api_key_env, "")
        if not key:
            raise RearankError(f"environment variable {args.api_key_env} (the API key) is not set or empty")
    check_args(args)
    options = backend_options(args.option)
    judge = None
    if declared(args.backend, "NEEDS_QRELS"):  # the oracle: judges requests by their text
        judge = _judge(args, TextJudge)
        options["qrels"] = judge.live
    if args.reasoning is not None:
        options["reasoning"] = args.reasoning
    reranker = Reranker(args.model, backend=args.backend, method=args.method, **options)
    limits = Limits(**{name: getattr(args, name) for name in LIMIT_FLAGS})
    return RerankService(reranker, model_name=args.served_name or args.model or args.backend, limits=limits,
                         api_key=key, capacity=args.queue_size, judge=judge, fusion_weight=args.fusion_weight)


def _listening(fd: int) -> socket.socket:
    """The inherited socket behind ``--fd``; anything but a listening TCP socket is a one-line error."""
    try:
        sock = socket.socket(fileno=fd)
    except OSError as err:
        raise RearankError(f"--fd {fd}: not an open socket ({err.strerror})") from None
    if sock.family not in (socket.AF_INET, socket.AF_INET6) or not sock.getsockopt(socket.SOL_SOCKET,
                                                                                  socket.SO_ACCEPTCONN):
        sock.detach()
        raise RearankError(f"--fd {fd}: not a listening TCP socket; pass one bound and listening (or use --port)")
    return sock


def _judge(args: argparse.Namespace, judge_cls: type) -> object:
    if args.dataset:
        pack = packs.resolve(args.dataset)
        return judge_cls.from_files(args.topics or pack.topics, args.docs or pack.docs, args.qrels or pack.qrels)
    if not (args.qrels and args.topics and args.docs):
        raise RearankError("the oracle backend judges requests by text: pass --dataset, or --qrels with --topics "
                           "and --docs")
    return judge_cls.from_files(args.topics, args.docs, args.qrels)


def _mcp_available() -> None:
    try:
        import rearank.server.mcp_server  # noqa: F401
    except ImportError as err:
        raise RearankError(f"the MCP server needs the mcp package 2.x ({err}); pip install 'rearank[serve]'") \
            from None


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Send what is written to file descriptor 1 (Python's and C's prints) to stderr for the block."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _searcher(args: argparse.Namespace) -> object | None:
    """The BM25 searcher of ``search_and_rerank``: over ``--corpus``, else the ``--dataset`` pack's docs."""
    from rearank.server.mcp_server import Searcher

    corpus = args.corpus or (str(packs.resolve(args.dataset).docs) if args.dataset else None)
    return Searcher.open(corpus, args.search_depth) if corpus else None


def _serve_mcp(args: argparse.Namespace, service: object, searcher: object | None, *, keyed: bool) -> None:
    from rearank.server.mcp_server import create_mcp, serve_http, serve_stdio

    mcp = create_mcp(service, searcher)
    tools = "rerank" + (f", search_and_rerank over {searcher.corpus.spec}" if searcher else "")
    if args.mcp == "stdio":
        print(f"serving MCP tools ({tools}) over stdio", file=sys.stderr, flush=True)
        serve_stdio(mcp, service)
        return
    serve_http(mcp, service, args.host, args.port, lambda url: print(
        f"serving MCP tools ({tools}) at {url}" + (" (bearer key required)" if keyed else ""),
        file=sys.stderr, flush=True))
