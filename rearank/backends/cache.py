"""A response cache for readers: (model, prompt, sampling) -> generated text, in memory and optionally on disk.

Only greedy (temperature 0) generations are cached: they are the ones a second call would reproduce. The disk
form is JSON lines (``{"key", "text", "prompt_tokens", "completion_tokens"}``) appended and flushed one response
at a time, so an interrupted run keeps what it generated; a torn last line is dropped with a warning on load.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rearank.backends.base import Backend, Generation, Prompt, SamplingSettings
from rearank.errors import RearankError
from rearank.io.files import PathLike
from rearank.io.jsonl_log import JsonlAppender, read_jsonl_log


def _generation(record: dict) -> Generation:
    return Generation(str(record["text"]), int(record["prompt_tokens"]), int(record["completion_tokens"]))


def cache_key(model: str, prompt: Prompt, settings: SamplingSettings) -> str:
    """A digest of the model name, the chat messages and the sampling settings."""
    blob = json.dumps([model, list(prompt.messages), asdict(settings)], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """Greedy responses by :func:`cache_key`; ``path`` (JSONL) makes it persistent across runs. Readers on several
    threads (:class:`rearank.rag.readers.SpreadReader`) may share one: writes are serialised."""

    def __init__(self, path: PathLike | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self.entries: dict[str, Generation] = {}
        self.hits = self.misses = 0
        self._log: JsonlAppender | None = None
        self._lock = threading.Lock()
        if self.path is not None and self.path.is_file():
            self._load(self.path)

    def _load(self, path: Path) -> None:
        records = read_jsonl_log(path, lambda r: (str(r["key"]), _generation(r)), "response-cache",
                                 "delete the file to start a fresh cache")
        self.entries.update((str(r["key"]), _generation(r)) for r in records)

    def get(self, key: str) -> Generation | None:
        with self._lock:
            found = self.entries.get(key)
            if found is None:
                self.misses += 1
            else:
                self.hits += 1
        return found

    def put(self, key: str, generation: Generation) -> None:
        with self._lock:
            self.entries[key] = generation
            if self.path is None:
                return
            if self._log is None:
                self._log = JsonlAppender(self.path)
            self._log.write({"key": key, "text": generation.text, "prompt_tokens": generation.prompt_tokens,
                             "completion_tokens": generation.completion_tokens})

    def close(self) -> None:
        if self._log is not None:
            self._log.close()


class CachedBackend:
    """Wrap a backend: greedy prompts already answered come from ``cache``, the rest go in one batch. Everything
    else (``calls``, ``tokenizer``, a server's load and 429 counts) is the wrapped backend's, so
    the engine schedules a cached backend as it would the backend itself; calls may come from many threads."""

    def __init__(self, backend: Backend, model: str, cache: ResponseCache | None = None) -> None:
        self.backend = backend
        self.name = getattr(backend, "name", type(backend).__name__)
        self.model = model
        self.cache = cache if cache is not None else ResponseCache()
        self.generated = 0  # prompts actually sent to the backend
        self._count = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        if name == "backend":  # not set yet (a copy being built): no recursion
            raise AttributeError(name)
        return getattr(self.backend, name)

    def generate(self, prompts: Sequence[Prompt], settings: SamplingSettings) -> list[Generation]:
        if settings.temperature > 0:
            self._sent(len(prompts))
            return self._call(list(prompts), settings)
        keys = [cache_key(self.model, p, settings) for p in prompts]
        out: list[Generation | None] = [self.cache.get(k) for k in keys]
        todo: dict[str, int] = {}  # first index of each missing key (repeats in one batch are generated once)
        for i, (key, found) in enumerate(zip(keys, out)):
            if found is None and key not in todo:
                todo[key] = i
        if todo:
            fresh = self._call([prompts[i] for i in todo.values()], settings)
            self._sent(len(todo))
            made = dict(zip(todo, fresh))
            for key, generation in made.items():
                if generation.finish_reason != "error":
                    self.cache.put(key, generation)
            out = [made[k] if g is None else g for k, g in zip(keys, out)]
        return [g for g in out if g is not None]

    def _sent(self, n: int) -> None:
        with self._count:
            self.generated += n

    def _call(self, prompts: list[Prompt], settings: SamplingSettings) -> list[Generation]:
        generations = list(self.backend.generate(prompts, settings))
        if len(generations) != len(prompts):
            raise RearankError(f"backend {self.name!r} returned {len(generations)} generations "
                               f"for {len(prompts)} prompts")
        return generations
