"""One contract on every face of the server (:mod:`rearank.server.contract`): the Jina and Cohere routes, the chat
route and the MCP tools (the SDK's own client, in-process) refuse the same requests with the same one line, in
the server's error shape over HTTP and as a tool error over MCP."""

from __future__ import annotations

import anyio
import pytest

from tests.conftest import require
from tests.serving import QUERY, TEXTS
from tests.unit.test_server_app_edges import InProcess, error, service_of

require("mcp", "the MCP server is built on the official SDK (rearank[serve])")
from mcp import Client

from rearank.server.mcp_server import create_mcp

ROUTES = ("/v1/rerank", "/v2/rerank")
CHAT = {"model": "rearank-oracle", "messages": [{"role": "user", "content": "hi"}]}


def mcp_errors(calls: list[dict]) -> list[tuple[bool, str]]:
    """``rerank`` tool calls through the SDK's client: (is_error, the text) of each answer."""
    service = service_of()
    mcp = create_mcp(service)

    async def session() -> list[tuple[bool, str]]:
        async with Client(mcp) as client:
            return [((answer := await client.call_tool("rerank", arguments)).is_error, answer.content[0].text)
                    for arguments in calls]

    service.feed.start()
    try:
        return anyio.run(session)
    finally:
        service.feed.stop()


@pytest.mark.parametrize(("change", "message"), [
    ({"query": ""}, "invalid request: query: the query is empty or blank: give the text to rank the documents for"),
    ({"query": " \t\n"}, "invalid request: query: the query is empty or blank: give the text to rank the documents for"),
    ({"top_n": True}, "invalid request: top_n: Input should be a valid integer"),
    ({"top_n": 2.0}, "invalid request: top_n: Input should be a valid integer"),
    ({"top_n": 0}, "invalid request: top_n: Input should be greater than or equal to 1"),
    ({"documents": []}, "invalid request: documents: give at least one document"),
])
def test_every_face_refuses_the_same_request_with_the_same_line(change, message):
    body = {"query": QUERY, "documents": TEXTS, **change}
    with InProcess(service_of()) as http:
        answers = [http.post(route, json=body) for route in ROUTES]
    for answer in answers:
        assert (answer.status_code, answer.json()) == (422, error(422, "invalid_request", message))
    [(is_error, text)] = mcp_errors([body])
    assert is_error and text == f"Error executing tool rerank: {message}"  # one line: no pydantic dump, no URL


def test_an_mcp_argument_of_the_wrong_type_is_one_line_without_a_url():
    [(is_error, text)] = mcp_errors([{"query": QUERY, "documents": "one string"}])
    assert (is_error, text) == (True, ("Error executing tool rerank: invalid request: documents: Input should be a "
                                      "valid list"))


@pytest.mark.parametrize(("documents", "extension", "message"), [
    (b'[{"text": "a", "score": NaN}, {"text": "b", "score": 1}]', b"{}",
     "invalid request: documents.0.score: Input should be a finite number"),
    (b'[{"text": "a", "score": 1e400}, {"text": "b", "score": 1}]', b"{}",
     "invalid request: documents.0.score: Input should be a finite number"),
    (b'[{"text": "a", "score": true}, {"text": "b", "score": 1}]', b"{}",
     "invalid request: documents.0.score: Input should be a valid number"),
    (b'[{"text": "a", "score": "2"}, {"text": "b", "score": 1}]', b"{}",
     "invalid request: documents.0.score: Input should be a valid number"),
    (b'[{"text": "a", "score": 2}, {"text": "b", "score": 1}]', b'{"fusion_weight": true}',
     "invalid request: rearank.fusion_weight: Input should be a valid number"),
    (b'[{"text": "a", "score": 2}, {"text": "b", "score": 1}]', b'{"fusion_weight": 1.5}',
     "invalid request: rearank.fusion_weight: Input should be less than or equal to 1"),
    (b'[{"text": "a", "score": 2}, "b"]', b'{"fusion_weight": 0.5}',
     ("invalid request: rearank.fusion_weight: fusion needs a score on every document; 1 of 2 have none (give each "
     "document a score, or leave fusion out)")),
    (b'["a", "b"]', b'{"fusion_weight": 0.5}',
     ("invalid request: rearank.fusion_weight: fusion needs a score on every document; 2 of 2 have none (give each "
     "document a score, or leave fusion out)")),
])
def test_scores_and_fusion_inputs_are_refused_on_both_rerank_routes(documents, extension, message):
    body = b'{"query": "q", "documents": ' + documents + b', "rearank": ' + extension + b"}"
    with InProcess(service_of()) as http:
        answers = [http.post(route, content=body, headers={"content-type": "application/json"}) for route in ROUTES]
    for answer in answers:
        assert (answer.status_code, answer.json()) == (422, error(422, "invalid_request", message))


def test_a_server_fusion_weight_refuses_a_mix_of_scored_and_unscored_documents_and_skips_unscored_ones():
    with InProcess(service_of(fusion_weight=0.5)) as http:
        mixed = http.post("/v1/rerank", json={"query": QUERY, "documents": [{"text": TEXTS[0], "score": 1.0},
                                                                            TEXTS[1]]})
        plain = http.post("/v1/rerank", json={"query": QUERY, "documents": TEXTS})
    assert mixed.status_code == 422 and "1 of 2 have none" in mixed.json()["error"]["message"]
    assert plain.status_code == 200 and plain.json()["rearank"]["order"] == [2, 4, 0, 1, 3, 5]


@pytest.mark.parametrize(("change", "message"), [
    ({"model": None}, "invalid request: model: Field required"),
    ({"stream": True}, ('invalid request: stream: streaming is not supported (each answer is one whole '
                       'chat.completion); send "stream": false or leave it out')),
    ({"n": True}, "invalid request: n: Input should be a valid integer"),
    ({"n": 65}, "invalid request: n: Input should be less than or equal to 64"),
    ({"max_tokens": 0}, "invalid request: max_tokens: Input should be greater than or equal to 1"),
    ({"temperature": True}, "invalid request: temperature: Input should be a valid number"),
    ({"messages": []}, "invalid request: messages: List should have at least 1 item after validation, not 0"),
    ({"messages": [{"content": "hi"}]}, "invalid request: messages.0.role: Field required"),
])
def test_the_chat_route_refuses_in_the_servers_shape(change, message):
    body = {key: value for key, value in {**CHAT, **change}.items() if value is not None}
    with InProcess(service_of()) as http:
        answer = http.post("/v1/chat/completions", json=body)
    assert (answer.status_code, answer.json()) == (422, error(422, "invalid_request", message))


def test_the_chat_route_still_answers_a_good_request():
    with InProcess(service_of()) as http:
        answer = http.post("/v1/chat/completions", json={**CHAT, "stream": False, "n": 2, "max_tokens": 8,
                                                          "temperature": 0.0, "seed": 3})
    assert answer.status_code == 200 and len(answer.json()["choices"]) == 2
