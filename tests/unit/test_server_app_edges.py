"""The rerank server's app at its edges, in-process (FastAPI's app through httpx's ASGI transport, no socket): every
error's exact body, the limits at and past their bounds (defaults included), the body read chunk by chunk, the key's
scheme and spacing, full Jina and Cohere bodies with known token counts, fusion set by the server, the 503 of a
stopping server, the chat route's errors, and the OpenAPI page's names."""

from __future__ import annotations

import asyncio
import re
import uuid
from dataclasses import replace
from typing import Self

import httpx
import pytest
from starlette.requests import Request

from rearank.api import Reranker
from rearank.server import Limits, RerankService, create_app
from rearank.server.app import ServerError, fused_order
from tests.serving import DOCS, EXPECTED, KEY, QRELS, QUERY, TEXTS, TOPICS, oracle_service


def service_of(**options) -> RerankService:
    return oracle_service(TOPICS, DOCS, QRELS, **options)


class InProcess:
    """The app over ``service`` in-process, its feed's worker running inside the block; each request is bounded
    (60 s), so a request that is never answered fails its test instead of hanging it."""

    def __init__(self, service: RerankService) -> None:
        self.service, self.app = service, create_app(service)

    def __enter__(self) -> Self:
        self.service.feed.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.service.feed.stop()

    def request(self, method: str, path: str, **options: object) -> httpx.Response:
        async def send() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://rearank.test") as http:
                return await asyncio.wait_for(http.request(method, path, **options), 60)
        return asyncio.run(send())

    def post(self, path: str, **options: object) -> httpx.Response:
        return self.request("POST", path, **options)

    def get(self, path: str, **options: object) -> httpx.Response:
        return self.request("GET", path, **options)


def error(status: int, kind: str, message: str) -> dict:
    return {"error": {"message": message, "type": kind, "code": status}}


def fixed_tokens(service: RerankService) -> None:
    """Every window of ``service``'s oracle counts 10 prompt and 5 completion tokens."""
    answer = service.reranker.backend.generate
    service.reranker.backend.generate = lambda prompts, settings: [
        replace(g, prompt_tokens=10, completion_tokens=5) for g in answer(prompts, settings)]


# -- errors and limits over HTTP ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("body", "message"), [
    (b'{"query": "q"}', "invalid request: documents: Field required"),
    (b"{}", "invalid request: query: Field required (1 more errors)"),
    (b"{not json", "invalid request: body: Invalid JSON: key must be a string at line 1 column 2"),
    (b'{"query": "q", "documents": [{"txt": "a"}]}', "invalid request: documents.0.text: Field required"),
    (b'{"query": "q", "documents": [7]}',
     "invalid request: documents.0: a document is a string or an object {text, score?}"),
    (b'{"query": "q", "documents": []}', "invalid request: documents: give at least one document"),
])
def test_an_invalid_request_is_422_naming_its_first_error_and_counting_the_rest(body, message):
    with InProcess(service_of()) as http:
        answer = http.post("/v1/rerank", content=body, headers={"content-type": "application/json"})
    assert (answer.status_code, answer.json()) == (422, error(422, "invalid_request", message))


def test_another_model_is_404_naming_both():
    with InProcess(service_of()) as http:
        answer = http.post("/v2/rerank", json={"model": "gpt", "query": QUERY, "documents": TEXTS})
    assert (answer.status_code, answer.json()) == (404, error(
        404, "model_not_found", "the model 'gpt' does not exist; this server serves 'rearank-oracle'"))


def test_each_limit_takes_its_bound_and_refuses_one_past_it():
    limits = Limits(max_documents=3, max_document_chars=17, max_query_chars=14)
    with InProcess(service_of(limits=limits)) as http:
        def post(query, documents):
            return http.post("/v1/rerank", json={"query": query, "documents": documents})

        fitting = [TEXTS[0], TEXTS[1], TEXTS[3]]  # 17, 9 and 9 characters
        assert post(QUERY, fitting).status_code == 200  # 3 documents, one of 17 characters, a query of 14
        too_many = post(QUERY, [*fitting, "x"])
        long_doc = post(QUERY, [TEXTS[0], TEXTS[0] + "!"])
        long_query = post(QUERY + "?", [TEXTS[0]])
    assert (too_many.status_code, too_many.json()) == (413, error(
        413, "too_large", "4 documents is over the limit of 3 per request"))
    assert (long_doc.status_code, long_doc.json()) == (413, error(
        413, "too_large", "document 1 has 18 characters, over the limit of 17"))
    assert (long_query.status_code, long_query.json()) == (413, error(
        413, "too_large", "the query has 15 characters, over the limit of 14"))


def test_the_default_limits():
    reranker = Reranker(backend="oracle", qrels={"q": {}}, window=4, step=2)
    service = RerankService(reranker, model_name="m")  # no limits given: the defaults
    assert service.feed.capacity == 256
    with InProcess(service) as http:
        def post(query, documents):
            return http.post("/v1/rerank", json={"query": query, "documents": documents})

        at_bounds = post("q" * 10_000, ["d" * 20_000] + ["e"] * 999)
        many = post("q", ["d"] * 1001)
        long_doc = post("q", ["d" * 20_001])
        long_query = post("q" * 10_001, ["d"])
    assert at_bounds.status_code == 200 and at_bounds.json()["rearank"]["order"] == list(range(1000))
    assert many.json() == error(413, "too_large", "1001 documents is over the limit of 1000 per request")
    assert long_doc.json() == error(413, "too_large", "document 0 has 20001 characters, over the limit of 20000")
    assert long_query.json() == error(413, "too_large", "the query has 10001 characters, over the limit of 10000")


def test_a_stopping_server_answers_503():
    service = service_of()
    with InProcess(service) as http:
        service.feed.stop()
        answer = http.post("/v1/rerank", json={"query": QUERY, "documents": TEXTS})
    assert (answer.status_code, answer.json()) == (503, error(503, "unavailable", "the server is shutting down"))


# -- the body, read chunk by chunk ----------------------------------------------------------------------------------

def read_body(service: RerankService, chunks: list[bytes], declared: int | None = None) -> bytes:
    """``service.body`` of a request whose body arrives as ``chunks`` (one ASGI message each), with a declared
    ``content-length`` or none (chunked transfer)."""
    headers = [] if declared is None else [(b"content-length", str(declared).encode())]
    messages = [{"type": "http.request", "body": chunk, "more_body": i + 1 < len(chunks)}
                for i, chunk in enumerate(chunks)]

    async def receive():
        return messages.pop(0)

    scope = {"type": "http", "method": "POST", "path": "/v1/rerank", "headers": headers, "query_string": b""}
    return asyncio.run(service.body(Request(scope, receive)))


def test_a_body_is_read_whole_up_to_its_limit():
    service = service_of(limits=Limits(max_body_bytes=6))
    assert read_body(service, [b"ab", b"cd", b"ef"]) == b"abcdef"  # streamed, exactly the limit
    assert read_body(service, [b"abc", b"def"], declared=6) == b"abcdef"


@pytest.mark.parametrize(("chunks", "declared", "message"), [
    ([b"abcdefg"], 7, "request body of 7 bytes is over the limit of 6 bytes"),  # refused before reading
    ([b"abc", b"defg"], None, "request body is over the limit of 6 bytes"),  # chunked: refused once past it
    ([b"abc", b"defg"], 3, "request body is over the limit of 6 bytes"),  # a declared length that lies
])
def test_a_body_over_its_limit_is_413(chunks, declared, message):
    service = service_of(limits=Limits(max_body_bytes=6))
    with pytest.raises(ServerError) as err:
        read_body(service, chunks, declared)
    assert (err.value.status, err.value.kind, err.value.message, str(err.value)) == (
        413, "too_large", message, message)


# -- the key --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("header", [f"Bearer {KEY}", f"bearer {KEY}", f"Bearer  {KEY}", f"BEARER {KEY} "])
def test_the_key_is_taken_with_any_case_of_scheme_and_spacing(header):
    service_of(api_key=KEY).check_key(header)


@pytest.mark.parametrize("header", [None, "", KEY, f"Basic {KEY}", f"Bearer {KEY}x", f"Bearer{KEY}", "Bearer"])
def test_a_missing_or_wrong_key_is_401(header):
    with pytest.raises(ServerError) as err:
        service_of(api_key=KEY).check_key(header)
    message = "missing or invalid API key: send 'Authorization: Bearer <key>'"
    assert (err.value.status, err.value.kind, err.value.message, err.value.headers) == (
        401, "unauthorized", message, {"WWW-Authenticate": "Bearer"})


def test_without_a_key_every_request_is_let_in():
    service = service_of()
    for header in (None, "Basic x", f"Bearer {KEY}"):
        service.check_key(header)


def test_models_answers_with_the_key_only():
    with InProcess(service_of(api_key=KEY)) as http:
        denied = http.get("/v1/models")
        listed = http.get("/v1/models", headers={"Authorization": f"Bearer {KEY}"})
    assert (denied.status_code, denied.json(), denied.headers["www-authenticate"]) == (401, error(
        401, "unauthorized", "missing or invalid API key: send 'Authorization: Bearer <key>'"), "Bearer")
    assert listed.json() == {"object": "list", "data": [{"id": "rearank-oracle", "object": "model",
                                                         "owned_by": "rearank"}]}


# -- whole answers ---------------------------------------------------------------------------------------------------

WINDOWS = [  # see EXPECTED; the permutation lists window positions by grade, the reasoning is the oracle's
    {"start": 2, "end": 6, "pass": 0, "round": 0, "partition": 0, "status": "ok", "permutation": [0, 2, 1, 3],
     "reasoning": "<think>Relevance judgments: [1]=3, [2]=0, [3]=2, [4]=0.</think>\n"
                  "<answer>[1] > [3] > [2] > [4]</answer>"},
    {"start": 0, "end": 4, "pass": 0, "round": 1, "partition": 0, "status": "ok", "permutation": [2, 3, 0, 1],
     "reasoning": "<think>Relevance judgments: [1]=1, [2]=0, [3]=3, [4]=2.</think>\n"
                  "<answer>[3] > [4] > [1] > [2]</answer>"},
]
EXTENSION = {"status": "ok", "method": "listwise", "order": EXPECTED, "calls": 2, "failed_windows": 0,
             "prompt_tokens": 20, "completion_tokens": 10, "windows": WINDOWS}


def test_the_whole_jina_answer():
    service = service_of()
    fixed_tokens(service)
    with InProcess(service) as http:
        body = http.post("/v1/rerank", json={"query": QUERY, "documents": [{"text": t} for t in TEXTS],
                                             "top_n": 2}).json()
    assert re.fullmatch(r"rerank-[0-9a-f]{32}", body.pop("id"))
    assert body == {"model": "rearank-oracle", "usage": {"total_tokens": 30},
                    "results": [{"index": 2, "relevance_score": 1.0, "document": {"text": TEXTS[2]}},
                                {"index": 4, "relevance_score": 5 / 6, "document": {"text": TEXTS[4]}}],
                    "rearank": EXTENSION}
    assert service.judge.live == {"": {"": 3}}  # the request's judgments were released


def test_the_whole_cohere_answer():
    service = service_of()
    fixed_tokens(service)
    with InProcess(service) as http:
        body = http.post("/v2/rerank", json={"query": QUERY, "documents": TEXTS, "top_n": 3}).json()
    made = uuid.UUID(body.pop("id"))
    assert made.version == 4
    assert body == {"results": [{"index": 2, "relevance_score": 1.0}, {"index": 4, "relevance_score": 5 / 6},
                                {"index": 0, "relevance_score": 4 / 6}],
                    "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1},
                             "tokens": {"input_tokens": 20, "output_tokens": 10}},
                    "rearank": EXTENSION}


def test_each_request_is_ranked_under_its_own_qid_with_its_query_in_the_prompt():
    service = service_of()
    qids, asked = [], []
    answer = service.reranker.backend.generate

    def recording(prompts, settings):
        qids.extend(p.qid for p in prompts)
        asked.extend(QUERY in "\n".join(m["content"] for m in p.messages) for p in prompts)
        return answer(prompts, settings)

    service.reranker.backend.generate = recording
    with InProcess(service) as http:
        for _ in range(2):
            assert http.post("/v1/rerank", json={"query": QUERY, "documents": TEXTS}).json()["rearank"][
                "order"] == EXPECTED
    assert len(qids) == 4 and qids[0] == qids[1] != qids[2] == qids[3] and all(isinstance(q, str) for q in qids)
    assert asked == [True] * 4


def test_fused_order_weighs_the_min_max_scaled_scores():
    # rank scores of order [0, 1, 2]: 1, 2/3, 1/3; first stage [10, 30, 20] scales to [0, 1, 0.5].
    # alpha 0.7: doc 0: 0.7; doc 1: 0.7 * 2/3 + 0.3 = 0.7667; doc 2: 0.7 / 3 + 0.15 = 0.3833.
    assert fused_order([0, 1, 2], [10.0, 30.0, 20.0], 0.7) == [1, 0, 2]
    assert fused_order([2, 0, 1], [5.0, 5.0, 5.0], 0.3) == [2, 0, 1]  # equal scores: the reranked order


def test_string_documents_seed_the_first_stage_in_input_order():
    # groupwise with its own fusion weight 0: the first-stage score (n - position) alone decides
    service = service_of(method="groupwise", options={"group_size": 4, "fusion_weight": 0.0})
    with InProcess(service) as http:
        ext = http.post("/v2/rerank", json={"query": QUERY, "documents": TEXTS}).json()["rearank"]
    assert (ext["status"], ext["order"]) == ("ok", [0, 1, 2, 3, 4, 5])


# -- the chat route and the app itself --------------------------------------------------------------------------------

def test_the_chat_route_refuses_bad_json_and_a_body_over_the_limit():
    with InProcess(service_of(limits=Limits(max_body_bytes=100))) as http:
        bad = http.post("/v1/chat/completions", content=b"{not json")
        big = http.post("/v1/chat/completions", json={"model": "rearank-oracle",
                                                      "messages": [{"role": "user", "content": "x" * 100}]})
    assert (bad.status_code, bad.json()) == (422, error(
        422, "invalid_request", "invalid request: body: Invalid JSON: key must be a string at line 1 column 2"))
    assert big.status_code == 413 and re.fullmatch(r"request body of \d+ bytes is over the limit of 100 bytes",
                                                   big.json()["error"]["message"])


def test_the_chat_route_answers_with_the_status_of_its_answer():
    with InProcess(service_of()) as http:
        other = http.post("/v1/chat/completions", json={"model": "gpt", "messages": [{"role": "user", "content": "hi"}]})
    assert (other.status_code, other.json()["error"]["message"]) == (
        404, "the model 'gpt' does not exist; this server serves 'rearank-oracle'")


def test_the_openapi_page_names_the_app_and_each_route():
    service = service_of()
    assert create_app(service).state.service is service
    with InProcess(service) as http:
        page = http.get("/openapi.json").json()
    assert (page["info"]["title"], page["info"]["summary"]) == (
        "rearank", "LLM reranking: Jina, Cohere v2 and chat-completions shapes")
    described = {path: (op["summary"], op["description"]) for path, ops in page["paths"].items()
                 for op in ops.values()}
    assert described["/v1/rerank"] == described["/rerank"] == (
        "Jina", "Rerank (Jina / vLLM shape): results sorted by relevance_score, which decreases with rank.")
    assert described["/v2/rerank"] == ("Cohere", "Rerank (Cohere v2 shape).")
    assert described["/v1/models"] == ("Models", "The one model served.")
