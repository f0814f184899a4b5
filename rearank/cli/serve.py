"""``rearank serve``: a rerank server (Jina/vLLM ``/v1/rerank``, Cohere ``/v2/rerank``, chat completions)."""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import sys

from rearank.backends.registry import rerank_backends
from rearank.data import packs
from rearank.errors import RearankError
from rearank.flags import backend_options
from rearank.methods import METHODS


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
                       help="reranking method (or one an installed package registers: entry points rearank.methods)")
    model.add_argument("--option", "-O", action="append", default=[], metavar="KEY=VALUE",
                       help="any option of rearank.Reranker, repeatable: method (window=20, step=10, group_size=20), "
                       "sampling (max_new_tokens=1024, temperature=0), reranking (top_k=100, batch_size=32), or "
                       "backend (device=cuda, tensor_parallel_size=2, base_url=http://host:8000/v1)")
    model.add_argument("--served-name", help="the model name clients send (default: --model, or the backend)")
    oracle = p.add_argument_group("oracle backend (ranks by judgments; documents and queries matched by text)")
    oracle.add_argument("--dataset", help="pack whose topics, docs and qrels judge the requests")
    oracle.add_argument("--qrels", help="qrels file (with --topics and --docs)")
    oracle.add_argument("--topics", help="topics: 'qid TAB text' TSV or BEIR queries.jsonl")
    oracle.add_argument("--docs", help="docs: 'docid TAB text' TSV or BEIR corpus.jsonl")
    http = p.add_argument_group("HTTP")
    http.add_argument("--host", default="127.0.0.1", help="address to bind (0.0.0.0 to listen on all)")
    http.add_argument("--port", type=int, default=8000, help="port to bind (0: one the OS picks, named in the "
                      "'serving ... at' line)")
    http.add_argument("--fd", type=int, metavar="N", help="serve on the listening socket inherited as file "
                      "descriptor N instead of binding --host/--port (socket activation; tests pass a port-0 socket)")
    http.add_argument("--api-key-env", metavar="NAME",
                      help="require 'Authorization: Bearer <key>' with the key read from this environment variable")
    http.add_argument("--queue-size", type=int, default=256, help="queries queued or running before 429")
    # former spelling of -O batch_size=N (windows per backend call; one window per query with listwise)
    http.add_argument("--max-batch-queries", type=int, help=argparse.SUPPRESS)
    http.add_argument("--max-documents", type=int, default=1000, help="documents per request (413 above)")
    http.add_argument("--max-document-chars", type=int, default=20_000, help="characters per document (413 above)")
    http.add_argument("--max-body-bytes", type=int, default=8 * 1024 * 1024, help="request body size (413 above)")
    http.add_argument("--fusion-weight", type=float, help="default weight of the rank score fused with documents' "
                      "first-stage scores when a request gives them (requests override it)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the reranker and serve it until interrupted."""
    try:
        import uvicorn

        from rearank.api import Reranker
        from rearank.server import Limits, RerankService, TextJudge, create_app
    except ImportError as err:
        raise RearankError(f"the server needs FastAPI and uvicorn ({err}); pip install 'rearank[serve]'") from None
    key = None
    if args.api_key_env:
        key = os.environ.get(args.api_key_env, "")
        if not key:
            raise RearankError(f"environment variable {args.api_key_env} (the API key) is not set or empty")
    for name in ("queue_size", "max_batch_queries", "max_documents", "max_document_chars", "max_body_bytes"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise RearankError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    inherited = _listening(args.fd) if args.fd is not None else None  # checked before the model loads
    options = backend_options(args.option)
    if args.max_batch_queries is not None:
        options.setdefault("batch_size", args.max_batch_queries)
    judge = None
    if args.backend == "oracle":
        judge = _judge(args, TextJudge)
        options["qrels"] = judge.live
    reranker = Reranker(args.model, backend=args.backend, method=args.method, **options)
    limits = Limits(max_documents=args.max_documents, max_document_chars=args.max_document_chars,
                    max_body_bytes=args.max_body_bytes)
    name = args.served_name or args.model or args.backend
    service = RerankService(reranker, model_name=name, limits=limits, api_key=key, capacity=args.queue_size,
                            judge=judge, fusion_weight=args.fusion_weight)
    config = uvicorn.Config(create_app(service), host=args.host, port=args.port, log_level="info")
    try:
        sock = inherited or config.bind_socket()
        sock.listen(config.backlog)  # from here a connection waits in the backlog: the line below can be acted on
        host, port = sock.getsockname()[:2]
        with contextlib.suppress(OSError):  # a log that cannot be written (stderr on a full disk) must not stop serving
            print(f"serving {name!r} ({args.method}, {args.backend}) at http://{f'[{host}]' if ':' in host else host}:{port}"
                  + (" (bearer key required)" if key else ""), file=sys.stderr, flush=True)
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        reranker.close()
    return 0


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
