"""The one contract of every face of the rerank server: the request fields, their checks and the error shape, used by
the HTTP routes (Jina, Cohere v2, chat completions) and the MCP tools alike.

Integers (``top_n``, ``k``, ``n``, ``max_tokens``, ``seed``) take integers only (``true`` is not 1); numbers
(document scores, ``fusion_weight``, ``temperature``, ``top_p``) take finite numbers only (no booleans, strings,
NaN or infinities); a query must hold some text. A refused request is a :class:`ServerError` whose message is one
line: ``invalid request: <where>: <what>`` and, when more fields are wrong, how many more. Over HTTP it is answered
as :func:`error_body`; an MCP tool answers it as a tool error with the same line.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

M = TypeVar("M", bound=BaseModel)
#: Most completions one chat request may ask for (``n``).
MAX_CHOICES = 64


class ServerError(Exception):
    """An HTTP error with its status, message, type and headers."""

    def __init__(self, status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.headers = status, message, kind, headers or {}


def error_body(message: str, kind: str, status: int) -> dict[str, Any]:
    """The one error shape of every route: ``{"error": {"message", "type", "code"}}``."""
    return {"error": {"message": message, "type": kind, "code": status}}


def invalid(message: str) -> ServerError:
    """A refused request (422, ``invalid_request``): ``invalid request: MESSAGE``."""
    return ServerError(422, f"invalid request: {message}", "invalid_request")


def one_line(err: ValidationError) -> str:
    """A validation error as one line: the first wrong field and what is wrong with it, and how many more are."""
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "body"
    more = f" ({err.error_count() - 1} more errors)" if err.error_count() > 1 else ""
    return f"{where}: {first['msg']}{more}"


def parse(model: type[M], body: bytes) -> M:
    """``body`` (JSON) read as ``model``, or the one-line 422 of its first error."""
    try:
        return model.model_validate_json(body)
    except ValidationError as err:
        raise invalid(one_line(err)) from None


def _has_text(query: str) -> str:
    if not query.strip():
        raise PydanticCustomError("blank_query", "the query is empty or blank: give the text to rank the documents for")
    return query


#: A query: some text beyond whitespace.
QueryText = Annotated[str, AfterValidator(_has_text)]
#: A count (``top_n``, ``k``, ``n``, ``max_tokens``): an integer of at least 1, never a boolean.
Count = Annotated[int, Field(strict=True, ge=1)]
#: A finite number, never a boolean or a string.
Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Document(_Body):
    """A document: its text, and optionally a first-stage score (for fusion); a bare string is its text."""

    text: str
    score: Number | None = None

    @model_validator(mode="before")
    @classmethod
    def _text_or_object(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"text": data}
        if not isinstance(data, dict | Document):
            raise PydanticCustomError("document", "a document is a string or an object {text, score?}")
        return data


class Extension(_Body):
    """Request-side rearank options: ``fusion_weight`` (0..1) fuses the rank score with documents' scores."""

    fusion_weight: Annotated[Number, Field(ge=0.0, le=1.0)] | None = None


class JinaRequest(_Body):
    """``POST /v1/rerank``, ``/rerank``: Jina's (and vLLM's) request."""

    model: str | None = None
    query: QueryText
    documents: list[Document]
    top_n: Count | None = None
    return_documents: Annotated[bool, Field(strict=True)] = True
    rearank: Extension = Field(default_factory=Extension)


class CohereRequest(_Body):
    """``POST /v2/rerank``: Cohere's v2 request (``max_tokens_per_doc`` is accepted and ignored)."""

    model: str | None = None
    query: QueryText
    documents: list[Document]
    top_n: Count | None = None
    max_tokens_per_doc: Count | None = None
    rearank: Extension = Field(default_factory=Extension)


class Message(BaseModel):
    """One chat message: its role and text."""

    model_config = ConfigDict(extra="allow")

    role: str
    content: str | None = None


class ChatRequest(BaseModel):
    """``POST /v1/chat/completions``: the fields the server reads (others are passed on and ignored). ``model`` is
    required, as in OpenAI's API; ``stream`` may only be false (answers are whole completions)."""

    model_config = ConfigDict(extra="allow")

    model: str
    messages: Annotated[list[Message], Field(min_length=1)]
    stream: Annotated[bool, Field(strict=True)] = False
    n: Annotated[Count, Field(le=MAX_CHOICES)] = 1
    max_tokens: Count | None = None
    temperature: Annotated[Number, Field(ge=0.0)] | None = None
    top_p: Annotated[Number, Field(gt=0.0, le=1.0)] | None = None
    seed: Annotated[int, Field(strict=True)] | None = None

    def checked(self) -> dict[str, Any]:
        """The request as the body :func:`rearank.backends.chat_server.chat_completion` reads; a stream is refused."""
        if self.stream:
            raise invalid("stream: streaming is not supported (each answer is one whole chat.completion); send "
                          "\"stream\": false or leave it out")
        return self.model_dump(exclude_unset=True, exclude_none=True)


def fusion_weight(documents: list[Document], asked: float | None, default: float | None) -> float | None:
    """The weight to fuse ``documents``' scores with (the request's ``fusion_weight``, else the server's), None
    when no fusion applies (no weight, or no document has a score); 422 when a weight applies and only some
    documents have a score, or the request asks for fusion and none has."""
    weight = asked if asked is not None else default
    scored = sum(d.score is not None for d in documents)
    if weight is None or (scored == 0 and asked is None):
        return None
    if scored < len(documents):
        raise invalid(f"rearank.fusion_weight: fusion needs a score on every document; {len(documents) - scored} "
                      f"of {len(documents)} have none (give each document a score, or leave fusion out)")
    return weight
