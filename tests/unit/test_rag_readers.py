"""Readers, templates and the response cache, with a counting fake backend."""

from __future__ import annotations

import json
import threading

import pytest

from rearank.backends.base import CONCURRENT, Generation, SamplingSettings
from rearank.backends.cache import CachedBackend, ResponseCache, cache_key
from rearank.errors import FormatError, RearankError
from rearank.methods.plain.reader import extract_answer, plain_messages
from rearank.rag.judge import make_judge
from rearank.rag.readers import (
    WRONG_ANSWER,
    GoldReader,
    LLMReader,
    NoisyGoldReader,
    make_reader,
)
from rearank.types import Passage, QAItem

PASSAGES = (Passage("0", "A", "alpha text"), Passage("1", "B", "beta text"), Passage("2", "C", "gamma", True))
ITEM = QAItem("q1", "Who?", ("Ann", "Anne"), PASSAGES, frozenset({"0", "1"}), "test")


class CountingBackend:
    """Answers 'Answer: <n>' with n the call's running prompt count; records every batch size."""

    name = "fake"

    def __init__(self) -> None:
        self.batches: list[int] = []

    def generate(self, prompts, settings):
        self.batches.append(len(prompts))
        return [Generation(f"Answer: reply{sum(self.batches)}-{i}\nmore", 10, 3) for i in range(len(prompts))]


def test_extract_answer():
    assert extract_answer("  Answer: Paris.\nBecause...") == "Paris."
    assert extract_answer("\n\nfinal answer - 1989") == "1989"
    assert extract_answer("") == ""


def test_oracle_any_all_and_has_answer():
    any_reader, all_reader = GoldReader(), GoldReader(require="all")
    batch = [(ITEM, PASSAGES[:1]), (ITEM, PASSAGES[:2]), (ITEM, PASSAGES[2:])]
    assert [o.answer for o in any_reader.read(batch)] == ["Ann", "Ann", "Ann"]  # the 3rd: has_answer
    assert [o.answer for o in all_reader.read(batch)] == [WRONG_ANSWER, "Ann", WRONG_ANSWER]
    assert any_reader.generated == 3
    with pytest.raises(RearankError):
        GoldReader(require="most")


def test_noisy_oracle_is_seeded_and_has_rate_p():
    items = [QAItem(f"q{i}", "?", ("yes",), PASSAGES, frozenset({"0"})) for i in range(2000)]
    batch = [(item, PASSAGES[:1]) for item in items]
    reader = NoisyGoldReader(p=0.7, seed=3)
    first = [o.answer for o in reader.read(batch)]
    assert first == [o.answer for o in NoisyGoldReader(p=0.7, seed=3).read(batch)]  # same seed, same answers
    assert first != [o.answer for o in NoisyGoldReader(p=0.7, seed=4).read(batch)]
    rate = first.count("yes") / len(first)
    assert abs(rate - 0.7) < 0.04  # binomial s.e. sqrt(.21/2000) = 0.010
    no_evidence = [(item, PASSAGES[1:2]) for item in items[:50]]
    assert {o.answer for o in reader.read(no_evidence)} == {WRONG_ANSWER}


def test_rrpo_template_layout():
    shown = [Passage(p.pid, p.title, t, p.has_answer) for p, t in zip(PASSAGES[:2], ["alpha text", "beta text"])]
    messages = plain_messages("rrpo", "Who?", shown)
    roles = [m["role"] for m in messages]
    # RRPO App. C: system (yes/no rule), one-shot (two passages, the question, the answer), one user turn per
    # passage, the question
    assert roles == ["system", "user", "user", "user", "assistant", "user", "user", "user"]
    assert "Yes or No" in messages[0]["content"]
    assert messages[5]["content"] == "passage 1: alpha text"
    assert messages[-1]["content"] == "Answer the question from these passages. Question: Who?"


def test_prompt_files_are_checked_and_replaceable(tmp_path):
    from rearank.errors import FormatError
    from rearank.methods.templates import load_prompt_file

    mine = tmp_path / "mine.yaml"
    mine.write_text("answer_format: plain\nsystem: Be brief.\nuser: |-\n  Q: {question}\n  {passages}\n", encoding="utf-8")
    reader = LLMReader(CountingBackend(), "m", template=str(mine))
    prompt = reader.prompt(QAItem("q", "Who?", ("x",), PASSAGES), PASSAGES[:1])
    assert [m["content"] for m in prompt.messages] == ["Be brief.", "Q: Who?\n[1] (A) alpha text"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("answer_format: plain\nuser: '{question} {answer}'\n", encoding="utf-8")
    with pytest.raises(FormatError, match="unknown placeholders \\['answer'\\]"):
        load_prompt_file(str(bad))


def test_llm_reader_batches_across_questions_and_caches(tmp_path):
    backend = CountingBackend()
    cache = ResponseCache(tmp_path / "cache.jsonl")
    reader = LLMReader(backend, "m", template="plain", cache=cache, batch_size=4)
    items = [QAItem(f"q{i}", f"Question {i}?", ("x",), PASSAGES) for i in range(5)]
    batch = [(item, PASSAGES[:k]) for item in items for k in (1, 2)]  # 10 distinct prompts
    first = reader.read(batch)
    assert backend.batches == [4, 4, 2]
    assert first[0].answer == "reply4-0" and first[0].response.startswith("Answer: reply4-0")
    again = reader.read(batch)
    assert backend.batches == [4, 4, 2] and again == first and reader.generated == 10
    reader.close()
    # a new reader on the same cache file makes no call either
    other_backend = CountingBackend()
    other = LLMReader(other_backend, "m", cache=ResponseCache(tmp_path / "cache.jsonl"), batch_size=4)
    assert other.read(batch) == first and other_backend.batches == []
    # another model name is another key
    assert cache_key("m", reader.prompt(*batch[0]), SamplingSettings()) != cache_key(
        "m2", reader.prompt(*batch[0]), SamplingSettings())


def test_cached_backend_skips_sampled_and_dedupes():
    backend = CountingBackend()
    cached = CachedBackend(backend, "m")
    prompt = LLMReader(CountingBackend(), "m").prompt(ITEM, PASSAGES[:1])
    out = cached.generate([prompt, prompt], SamplingSettings(temperature=0.0))
    assert backend.batches == [1] and out[0] == out[1]
    cached.generate([prompt], SamplingSettings(temperature=0.7))
    cached.generate([prompt], SamplingSettings(temperature=0.7))
    assert backend.batches == [1, 1, 1]  # sampled generations are never cached


def test_cache_torn_last_line_dropped_and_bad_middle_line_fails(tmp_path):
    path = tmp_path / "c.jsonl"
    good = json.dumps({"key": "a", "text": "t", "prompt_tokens": 1, "completion_tokens": 1})
    path.write_text(good + "\n" + '{"key": "b", "te')
    cache = ResponseCache(path)
    assert set(cache.entries) == {"a"} and path.read_text() == good + "\n"
    path.write_text("garbage\n" + good + "\n")
    with pytest.raises(FormatError, match=r"c\.jsonl:1:"):
        ResponseCache(path)


def test_make_reader_rejects_unknown():
    with pytest.raises(RearankError, match="unknown reader"):
        make_reader("gpt")


def test_spread_reader_splits_a_batch_over_servers_in_order():
    from rearank.rag.readers import SpreadReader

    backends = [CountingBackend(), CountingBackend()]
    shared = ResponseCache()
    spread = SpreadReader([LLMReader(b, "m", template="plain", cache=shared) for b in backends])
    items = [QAItem(f"q{i}", f"Question {i}?", ("x",), PASSAGES) for i in range(5)]
    out = spread.read([(item, PASSAGES[:1]) for item in items])
    assert [b.batches for b in backends] == [[3], [2]] and spread.generated == 5
    # each server's answers come back in the batch's order: the first server's 3, then the second's 2
    assert [o.answer for o in out] == ["reply3-0", "reply3-1", "reply3-2", "reply2-0", "reply2-1"]
    assert len(shared.entries) == 5
    with pytest.raises(RearankError, match="list of base_url"):
        make_reader("hf", "m", base_url=["http://a/v1"])


class ServerLike:
    """One prompt a call from many threads, as an OpenAI-compatible server takes them: the first two calls wait
    for each other (so a reader that sent one prompt at a time would fail here), answers are each prompt's qid."""

    name, calls = "served", CONCURRENT

    def __init__(self) -> None:
        self.batches: list[int] = []
        self.met = threading.Barrier(2, timeout=10)

    def generate(self, prompts, settings):
        self.batches.append(len(prompts))
        if len(self.batches) <= 2:
            self.met.wait()
        return [Generation(f"Answer: {p.qid}", 10, 3) for p in prompts]


def test_a_readers_and_a_judges_concurrency_option_is_their_engines_in_flight_limit():
    url = "http://127.0.0.1:9/v1"  # nothing is sent
    assert make_reader("openai", "m", base_url=url, concurrency=2).concurrency == 2
    assert make_reader("openai", "m", base_url=url).concurrency == "auto"
    assert make_judge("m", base_url=url, concurrency=3).concurrency == 3


def test_llm_reader_on_a_concurrent_backend_reads_in_flight_through_the_engine():
    backend = ServerLike()
    reader = LLMReader(backend, "m", template="plain", batch_size=8, concurrency=4)
    items = [QAItem(f"q{i}", f"Question {i}?", ("x",), PASSAGES) for i in range(8)]
    out = reader.read([(item, PASSAGES[:1]) for item in items])
    assert [o.answer for o in out] == [f"q{i}" for i in range(8)]  # in the batch's order
    assert backend.batches == [1] * 8 and reader.generated == 8
    assert reader.read([(items[0], PASSAGES[:1])])[0].answer == "q0" and backend.batches == [1] * 8  # cached
