"""The response cache and its backend wrapper, value by value: the key's format, the file's records, the counters,
the settings and model passed on, error generations, mixed batches and copies (issue 33, mutation testing)."""

from __future__ import annotations

import copy
import hashlib
import json

import pytest

from rearank.backends.base import ERROR, Generation, Prompt, SamplingSettings
from rearank.backends.cache import CachedBackend, ResponseCache, cache_key
from rearank.errors import FormatError, RearankError


def prompt(text: str) -> Prompt:
    return Prompt(({"role": "user", "content": text},))


class Recording:
    """Answers ``out<call>-<i>`` (5 prompt and 2 completion tokens, ``finish`` as the reason); records each call's
    prompts' texts and settings."""

    name = "rec"

    def __init__(self, finish: str = "stop", short: bool = False) -> None:
        self.calls: list[tuple[list[str], SamplingSettings]] = []
        self.finish = finish
        self.short = short  # answer one generation fewer than asked

    def generate(self, prompts, settings):
        self.calls.append(([p.messages[0]["content"] for p in prompts], settings))
        n = len(prompts) - 1 if self.short else len(prompts)
        return [Generation(f"out{len(self.calls)}-{i}", 5, 2, finish_reason=self.finish) for i in range(n)]


def test_key_is_the_sha256_of_sorted_json_with_text_as_written():
    # the key is what a cache file written by an earlier run is read by: its format must not drift
    spelled = ('["m", [{"content": "Qui est-ce ? é", "role": "user"}], '
               '{"max_new_tokens": 2048, "seed": 0, "temperature": 0.0, "top_p": 1.0}]')
    assert cache_key("m", prompt("Qui est-ce ? é"), SamplingSettings()) == hashlib.sha256(
        spelled.encode("utf-8")).hexdigest()
    # the same message written with its fields in another order is the same prompt
    reordered = Prompt(({"content": "Qui est-ce ? é", "role": "user"},))
    assert cache_key("m", reordered, SamplingSettings()) == cache_key("m", prompt("Qui est-ce ? é"), SamplingSettings())


def test_a_reloaded_cache_keeps_the_token_counts(tmp_path):
    path = tmp_path / "c.jsonl"
    cache = ResponseCache(path)
    cache.put("k", Generation("t", 7, 3))
    cache.close()
    assert ResponseCache(path).entries == {"k": Generation("t", 7, 3)}


def test_closing_a_cache_that_never_wrote(tmp_path):
    cache = ResponseCache(tmp_path / "c.jsonl")
    cache.close()
    assert not (tmp_path / "c.jsonl").exists()


def test_hits_and_misses_are_counted():
    cache = ResponseCache()
    assert (cache.hits, cache.misses) == (0, 0)
    assert cache.get("a") is None and cache.get("b") is None
    cache.put("a", Generation("t", 1, 1))
    assert [cache.get("a") for _ in range(3)] == [Generation("t", 1, 1)] * 3
    assert (cache.hits, cache.misses) == (3, 2)


@pytest.mark.parametrize("record", [
    {"text": "t", "prompt_tokens": 1, "completion_tokens": 1},  # no key
    {"key": "a", "prompt_tokens": 1, "completion_tokens": 1},  # no text
    {"key": "a", "text": "t", "prompt_tokens": "many", "completion_tokens": 1},
])
def test_a_bad_record_before_the_last_is_refused_with_what_to_do(tmp_path, record):
    path = tmp_path / "c.jsonl"
    good = {"key": "b", "text": "t", "prompt_tokens": 1, "completion_tokens": 1}
    path.write_text(json.dumps(record) + "\n" + json.dumps(good) + "\n", encoding="utf-8")
    with pytest.raises(FormatError, match=r"c\.jsonl:1: not a response-cache record \(.*\); "
                                          r"delete the file to start a fresh cache$"):
        ResponseCache(path)


def test_the_wrapper_is_named_after_its_backend():
    class Nameless:
        def generate(self, prompts, settings):
            return []

    assert CachedBackend(Recording(), "m").name == "rec"
    assert CachedBackend(Nameless(), "m").name == "Nameless"


def test_a_short_answer_is_refused_naming_the_backend_and_counts():
    cached = CachedBackend(Recording(short=True), "m")
    with pytest.raises(RearankError, match=r"^backend 'rec' returned 1 generations for 2 prompts$"):
        cached.generate([prompt("a"), prompt("b")], SamplingSettings())


@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_the_settings_reach_the_backend(temperature):
    backend = Recording()
    settings = SamplingSettings(max_new_tokens=64, temperature=temperature, seed=3)
    CachedBackend(backend, "m").generate([prompt("a")], settings)
    assert backend.calls == [(["a"], settings)]


def test_two_models_sharing_a_cache_do_not_share_answers():
    shared = ResponseCache()
    first, second = Recording(), Recording()
    CachedBackend(first, "m1", shared).generate([prompt("a")], SamplingSettings())
    CachedBackend(second, "m2", shared).generate([prompt("a")], SamplingSettings())
    assert first.calls == second.calls == [(["a"], SamplingSettings())]


def test_an_error_generation_is_not_cached():
    failing = Recording(finish=ERROR)
    shared = ResponseCache()
    cached = CachedBackend(failing, "m", shared)
    cached.generate([prompt("a")], SamplingSettings())
    cached.generate([prompt("a")], SamplingSettings())
    assert len(failing.calls) == 2 and shared.entries == {}


def test_a_batch_mixing_cached_and_new_prompts_keeps_its_order():
    backend = Recording()
    cached = CachedBackend(backend, "m")
    first = cached.generate([prompt("a")], SamplingSettings())
    out = cached.generate([prompt("a"), prompt("b")], SamplingSettings())
    assert backend.calls == [(["a"], SamplingSettings()), (["b"], SamplingSettings())]
    assert [g.text for g in out] == [first[0].text, "out2-0"] == ["out1-0", "out2-0"]
    assert cached.generated == 2


def test_a_copy_wraps_the_same_backend():
    backend = Recording()
    cached = CachedBackend(backend, "m")
    assert copy.copy(cached).backend is backend  # the copy is built without recursing through __getattr__
    with pytest.raises(AttributeError, match="^backend$"):
        getattr(CachedBackend.__new__(CachedBackend), "backend")  # noqa: B009 - the lookup is what is tested
