"""Ground-truth decoding shared by the RAG rewards: a JSON string decoded once per distinct string, never raising."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any, TypeVar

T = TypeVar("T")


def truth_parser(build: Callable[[Any], T | None], maxsize: int = 8192) -> Callable[[object], T | None]:
    """A parser of verl ground truth for ``build`` (decoded JSON -> record, or None when malformed).

    A ``str`` (or UTF-8 ``bytes``) is JSON, decoded and built once per distinct string (LRU cache, emptied by the
    parser's ``cache_clear()``); any other object goes to ``build`` as it is. Whatever goes wrong gives None, never
    an exception.
    """

    @lru_cache(maxsize=maxsize)
    def from_json(text: str) -> T | None:
        try:
            return build(json.loads(text))
        except Exception:  # noqa: BLE001 -- anything undecodable is malformed data
            return None

    def parse(ground_truth: object) -> T | None:
        try:
            if isinstance(ground_truth, bytes):
                ground_truth = ground_truth.decode("utf-8")
            return from_json(ground_truth) if isinstance(ground_truth, str) else build(ground_truth)
        except Exception:  # noqa: BLE001 -- anything undecodable is malformed data
            return None

    parse.cache_clear = from_json.cache_clear  # type: ignore[attr-defined]
    return parse
