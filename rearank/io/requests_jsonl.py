"""RankLLM request JSONL, as written by Anserini ``-outputRerankerRequests`` and read by RankLLM.

One line per query::

    {"query": {"text": "...", "qid": "..."},
     "candidates": [{"docid": "...", "score": 12.3, "doc": {"contents": "..."}}, ...]}

``doc`` may hold ``contents``, ``text``, ``segment``, ``body``, ``passage`` or ``content`` for the passage text
and ``title`` for a title (or be a plain string). Candidates keep their list order (the first-stage ranking).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable

from rearank.errors import FormatError
from rearank.io.files import PathLike, atomic_write, check_id, iter_json_lines
from rearank.types import Candidate, Query, Request

log = logging.getLogger("rearank.io")
TEXT_KEYS = ("text", "contents", "segment", "body", "passage", "content")


def _ident(value: object, where: str, path: PathLike, number: int) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value) == "":
        raise FormatError(path, number, f"{where} must be a non-empty string or integer, got {value!r}")
    return str(value)


def _doc_fields(doc: object, where: str, path: PathLike, number: int) -> tuple[str, str]:
    """Return ``(title, text)`` from a candidate's ``doc``."""
    if isinstance(doc, str):
        return "", doc
    if not isinstance(doc, dict):
        raise FormatError(path, number, f"{where}.doc must be an object or a string")
    title = doc.get("title") or ""
    text_key = next((key for key in TEXT_KEYS if key in doc), None)
    if text_key is None and not title:
        raise FormatError(
            path, number, f"{where}.doc has none of {', '.join(TEXT_KEYS)} or title (keys: {sorted(doc)})"
        )
    text = (doc.get(text_key) or "") if text_key else ""
    if not isinstance(title, str) or not isinstance(text, str):
        raise FormatError(path, number, f"{where}.doc title/text must be strings")
    return title, text


def _candidate(obj: object, where: str, path: PathLike, number: int) -> Candidate:
    if not isinstance(obj, dict):
        raise FormatError(path, number, f"{where} must be an object")
    docid = _ident(obj.get("docid"), f"{where}.docid", path, number)
    score = obj.get("score")
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
        raise FormatError(path, number, f"{where}.score must be a finite number, got {score!r}")
    title, text = _doc_fields(obj.get("doc", {}), where, path, number)
    return Candidate(docid=docid, score=float(score), text=text, title=title)


def read_requests(path: PathLike) -> list[Request]:
    """Read a RankLLM request JSONL file into requests (candidates in file order).

    A docid repeated within a query keeps its first candidate; the repeats are dropped with one warning.
    """
    requests = []
    duplicates = 0
    for number, obj in iter_json_lines(path):
        query = obj.get("query")
        if not isinstance(query, dict):
            raise FormatError(path, number, "missing 'query' object")
        text = query.get("text")
        if not isinstance(text, str):
            raise FormatError(path, number, "query.text must be a string")
        qid = _ident(query.get("qid"), "query.qid", path, number)
        candidates = obj.get("candidates")
        if not isinstance(candidates, list):
            raise FormatError(path, number, "missing 'candidates' list")
        parsed = [_candidate(c, f"candidates[{i}]", path, number) for i, c in enumerate(candidates)]
        first: dict[str, Candidate] = {}
        for candidate in parsed:
            first.setdefault(candidate.docid, candidate)
        unique = list(first.values())
        duplicates += len(parsed) - len(unique)
        requests.append(Request(query=Query(qid=qid, text=text), candidates=tuple(unique)))
    if duplicates:
        log.warning("%s: %d repeated candidate docids within a query ignored (the first of each was kept)",
                    path, duplicates)
    return requests


def request_to_json(request: Request) -> dict:
    """The RankLLM JSON object of one request; docs are ``{"title", "text"}`` or ``{"contents"}``."""
    return {
        "query": {"text": request.query.text, "qid": request.query.qid},
        "candidates": [
            {
                "docid": c.docid,
                "score": c.score,
                "doc": {"title": c.title, "text": c.text} if c.title else {"contents": c.text},
            }
            for c in request.candidates
        ],
    }


def write_requests(path: PathLike, requests: Iterable[Request]) -> None:
    """Write requests as RankLLM request JSONL, write-then-rename.

    A qid or docid that a TREC run of these requests could not carry (empty, whitespace, a leading U+FEFF) is
    refused with a one-line error naming it and ``path``.
    """
    with atomic_write(path) as handle:
        for request in requests:
            check_id(request.query.qid, "qid", path)
            for candidate in request.candidates:
                check_id(candidate.docid, "docid", path)
            handle.write(json.dumps(request_to_json(request), ensure_ascii=False) + "\n")
