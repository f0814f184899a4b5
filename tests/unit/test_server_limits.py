"""The server's promises on size and availability, over real HTTP: the 10,000-character query limit, body limits
declared or streamed (chunked) on every POST route, ``rearank serve``'s ``--max-*`` flags reaching the limits,
and 503 once the server is shutting down."""

from __future__ import annotations

import dataclasses

import httpx
import pytest

from rearank.cli import build_parser
from rearank.cli.serve import LIMIT_FLAGS, build_service
from rearank.server import Limits
from tests.parsers import commands, shown
from tests.serving import oracle_service, running

QUERY = "what is a flea"
TEXTS = ["fleas are insects", "dogs bark", "the flea life cycle", "cats purr"]
TOPICS = {"q1": QUERY}
DOCS = {f"d{i}": ("", text) for i, text in enumerate(TEXTS)}
QRELS = {"q1": {"d2": 3, "d0": 1}}
ROUTES = ("/v1/rerank", "/rerank", "/v2/rerank", "/v1/chat/completions")


def error(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["message"]


@pytest.mark.parametrize("path", ["/v1/rerank", "/v2/rerank"])
def test_a_query_over_10000_characters_is_413(path):
    with running(oracle_service(TOPICS, DOCS, QRELS)) as url:
        over = httpx.post(url + path, json={"query": "q" * 10_001, "documents": TEXTS})
        at = httpx.post(url + path, json={"query": "q" * 10_000, "documents": TEXTS})
    assert error(over) == (413, "the query has 10001 characters, over the limit of 10000")
    assert over.json()["error"]["type"] == "too_large"
    assert at.status_code == 200 and len(at.json()["results"]) == len(TEXTS)


def chunked(total: int, size: int = 100):
    """A JSON rerank body of about ``total`` bytes sent in chunks (no Content-Length: Transfer-Encoding: chunked)."""
    yield b'{"query": "q", "documents": ["'
    for _ in range(total // size):
        yield b"x" * size
    yield b'"]}'


@pytest.mark.parametrize("path", ROUTES)
def test_body_limits_hold_for_declared_and_streamed_bodies_on_every_route(path):
    limit = 2000
    with running(oracle_service(TOPICS, DOCS, QRELS, limits=Limits(max_body_bytes=limit))) as url:
        streamed = httpx.post(url + path, content=chunked(10 * limit))
        declared = httpx.post(url + path, content=b"{" + b" " * limit + b"}")
        under = httpx.post(url + path, content=chunked(limit // 2))
    assert "content-length" not in streamed.request.headers  # it was streamed
    assert error(streamed) == (413, f"request body is over the limit of {limit} bytes")
    assert error(declared) == (413, f"request body of {limit + 2} bytes is over the limit of {limit} bytes")
    assert under.status_code != 413  # read whole: a rerank route answers, the chat route judges the body


def serve_args(tmp_path, *flags: str):
    (tmp_path / "topics.tsv").write_text(f"q1\t{QUERY}\n")
    (tmp_path / "docs.tsv").write_text("".join(f"d{i}\t{t}\n" for i, t in enumerate(TEXTS)))
    (tmp_path / "qrels.txt").write_text("q1 0 d2 3\n")
    return build_parser().parse_args(["serve", "--backend", "oracle", "--topics", str(tmp_path / "topics.tsv"),
                                      "--docs", str(tmp_path / "docs.tsv"), "--qrels", str(tmp_path / "qrels.txt"),
                                      "-O", "window=2", "-O", "step=1", *flags])


def test_every_max_flag_of_serve_is_a_limit():
    parser = dict(commands(build_parser()))[("serve",)]
    flags = {a.dest for a in shown(parser) if a.dest.startswith("max_")}
    assert flags == set(LIMIT_FLAGS) == {f.name for f in dataclasses.fields(Limits)}
    assert Limits(**{a.dest: a.default for a in shown(parser) if a.dest in LIMIT_FLAGS}) == Limits()


def test_the_max_flags_reach_the_servers_limits(tmp_path):
    service = build_service(serve_args(tmp_path, "--max-documents", "3", "--max-document-chars", "20",
                                       "--max-query-chars", "30", "--max-body-bytes", "600"))
    assert service.limits == Limits(max_documents=3, max_document_chars=20, max_query_chars=30, max_body_bytes=600)
    with running(service) as url:
        def post(query: str = QUERY, documents: list[str] = TEXTS[:3]) -> httpx.Response:
            return httpx.post(url + "/v1/rerank", json={"query": query, "documents": documents})

        assert post().status_code == 200
        assert error(post(documents=TEXTS))[0] == 413
        assert error(post(documents=["x" * 21]))[1] == "document 0 has 21 characters, over the limit of 20"
        assert error(post(query="q" * 31))[1] == "the query has 31 characters, over the limit of 30"
        assert post(query="q" * 30, documents=["x" * 20]).status_code == 200
        assert "over the limit of 600 bytes" in error(post(documents=["x" * 20] * 3 + ["y"] * 200))[1]


@pytest.mark.parametrize("flag", ["--max-documents", "--max-document-chars", "--max-query-chars", "--max-body-bytes"])
def test_a_max_flag_below_one_is_refused(flag, tmp_path):
    from rearank.errors import RearankError

    with pytest.raises(RearankError, match=f"^{flag} must be at least 1, got 0$"):
        build_service(serve_args(tmp_path, flag, "0"))


def test_a_request_while_the_server_shuts_down_is_503():
    service = oracle_service(TOPICS, DOCS, QRELS)
    with running(service) as url:
        assert httpx.post(url + "/v1/rerank", json={"query": QUERY, "documents": TEXTS}).status_code == 200
        service.feed.stop()  # what the server's shutdown does first
        late = httpx.post(url + "/v2/rerank", json={"query": QUERY, "documents": TEXTS})
    assert error(late) == (503, "the server is shutting down")
    assert late.json()["error"]["type"] == "unavailable"
