"""Reader edges: the reader card and its refusals, the LLM reader's settings, prompt and failed answers, the oracle
readers' options and draws, the spread reader's parts, ``complete``, the reader names and ``make_reader``'s wiring."""

from __future__ import annotations

import dataclasses
import hashlib
import threading

import pytest

from rearank.backends import registry
from rearank.backends.base import ERROR, Generation, SamplingSettings
from rearank.backends.cache import ResponseCache
from rearank.errors import RearankError
from rearank.rag.readers import (
    WRONG_ANSWER,
    GoldReader,
    LLMReader,
    NoisyGoldReader,
    ReaderOutput,
    SpreadReader,
    complete,
    make_reader,
    reader_card,
    reader_names,
)
from rearank.types import Passage, QAItem
from tests.methods import CharTokenizer
from tests.unit.test_rag_readers import ITEM, PASSAGES

SYSTEM = "Answer the question using the passages. Reply with the answer only, in a few words, with no explanation."


class Recorder:
    """Answers each prompt with ``answers`` in turn (None: a failed generation); keeps every call's prompts and
    settings."""

    name = "rec"

    def __init__(self, answers=("Answer: x",)) -> None:
        self.answers, self.calls = list(answers), []

    def generate(self, prompts, settings):
        self.calls.append((list(prompts), settings))
        out = []
        for _ in prompts:
            text = self.answers[len(out) % len(self.answers)]
            out.append(Generation("partial", 4, 1, finish_reason=ERROR) if text is None else Generation(text, 4, 1))
        return out


class Nameless:
    """A backend without a name, answering ``ok``."""

    def generate(self, prompts, settings):
        return [Generation("ok", 1, 1) for _ in prompts]


def test_reader_card_is_the_template_s_reader_format_and_other_formats_are_refused():
    assert [reader_card(t).name for t in ("plain", "rrpo", "arena", "barrag_generator")] == [
        "plain", "plain", "arena", "barrag-generator"]
    choices = "choose one of: rrpo, plain, barrag_generator, arena, or the path of a YAML prompt file"
    with pytest.raises(RearankError, match=rf"^--template 'judge' is a judge prompt, not a reader's; {choices}$"):
        reader_card("judge")
    with pytest.raises(RearankError, match=r"^--template 'barrag_selector' is a barrag-selector prompt, not a reader's"):
        reader_card("barrag_selector")


def test_llm_reader_defaults_name_and_batch_size_floor():
    backend = Recorder()
    reader = LLMReader(backend, "m")
    assert reader.name == "rec:m" and reader.template == "plain" and reader.card.name == "plain"
    assert reader.settings == SamplingSettings(max_new_tokens=32) and reader.batch_size == 32
    assert reader.max_passage_tokens == 300 and reader.tokenizer is None and reader.generated == 0
    assert LLMReader(Nameless(), "m2").name == "llm:m2"
    with pytest.raises(RearankError, match=r"^reader batch_size must be at least 1, got 0$"):
        LLMReader(backend, "m", batch_size=0)
    one = Recorder()
    LLMReader(one, "m", batch_size=1).read([(ITEM, PASSAGES[:1]), (ITEM, PASSAGES[:2])])
    assert [len(prompts) for prompts, _ in one.calls] == [1, 1]


def test_llm_reader_sends_its_settings_and_uses_the_given_cache(tmp_path):
    backend, cache = Recorder(), ResponseCache()
    settings = SamplingSettings(temperature=0.0, max_new_tokens=7)
    reader = LLMReader(backend, "m", settings=settings, cache=cache)
    assert reader.read([(ITEM, PASSAGES[:1])]) == [ReaderOutput("Answer: x", "x")]
    assert backend.calls[0][1] is settings and reader.backend.cache is cache and len(cache.entries) == 1
    other_model = Recorder()
    LLMReader(other_model, "m2", settings=settings, cache=cache).read([(ITEM, PASSAGES[:1])])
    assert len(other_model.calls) == 1 and len(cache.entries) == 2  # the model is part of the cache key
    default = Recorder()
    LLMReader(default, "m").read([(ITEM, PASSAGES[:1])])
    assert default.calls[0][1] == SamplingSettings(max_new_tokens=32)


def test_llm_reader_prompt_cleans_and_cuts_each_passage():
    reader = LLMReader(Recorder(), "m", max_passage_tokens=2)
    passages = (Passage("7", "T", "  one\n two   three "), Passage("8", "", "four", True))
    prompt = reader.prompt(ITEM, passages)
    assert prompt.messages == ({"role": "system", "content": SYSTEM},
                               {"role": "user", "content": "Passages:\n[1] (T) one two\n[2] four\n\nQuestion: Who?\nAnswer:"})
    assert prompt.qid == "q1" and prompt.docids == ("7", "8") and prompt.answer is None
    whole = LLMReader(Recorder(), "m").prompt(ITEM, (Passage("9", "", " ".join(["w"] * 301)),))
    assert whole.messages[1]["content"] == "Passages:\n[1] " + " ".join(["w"] * 300) + "\n\nQuestion: Who?\nAnswer:"
    uncut = LLMReader(Recorder(), "m", max_passage_tokens=None).prompt(ITEM, (Passage("9", "", "a  b c"),))
    assert uncut.messages[1]["content"] == "Passages:\n[1] a b c\n\nQuestion: Who?\nAnswer:"


def test_the_card_renders_the_cut_passages_with_their_ids_and_evidence_flags():
    reader = LLMReader(Recorder(), "m", max_passage_tokens=1)
    seen = []
    reader.card = dataclasses.replace(reader.card, render=lambda spec, question, shown: seen.extend(shown) or [])
    reader.prompt(ITEM, (Passage("7", "T", "one two"), Passage("8", "", "four", True)))
    assert seen == [Passage("7", "T", "one"), Passage("8", "", "four", True)]


def test_llm_reader_cuts_by_the_backend_s_tokenizer_and_asks_the_card_s_grammar():
    backend = Recorder()
    backend.tokenizer = CharTokenizer()
    reader = LLMReader(backend, "m", max_passage_tokens=4)
    assert reader.tokenizer is backend.tokenizer
    prompt = reader.prompt(ITEM, (Passage("9", "", "abcdefgh"),))
    assert prompt.messages[1]["content"] == "Passages:\n[1] abcd\n\nQuestion: Who?\nAnswer:"
    grammar = LLMReader(Recorder(), "m", template="arena").prompt(ITEM, PASSAGES[:2]).answer
    assert grammar is not None and grammar == reader_card("arena").grammar(2)


@pytest.mark.parametrize(("template", "answer"), [("plain", "Answer: Ann"), ("arena", "<answer>Ann</answer>")])
def test_a_failed_generation_is_marked_and_read_as_an_empty_response(template, answer):
    out = LLMReader(Recorder([None, answer]), "m", template=template).read([(ITEM, PASSAGES[:1]), (ITEM, PASSAGES[:2])])
    assert out == [ReaderOutput("", "", failed=True), ReaderOutput(answer, "Ann")]


def test_complete_gives_texts_and_empty_strings_for_failures_in_batches():
    backend = Recorder(["one", None, "three"])
    settings = SamplingSettings(max_new_tokens=5)
    prompts = [LLMReader(Recorder(), "m").prompt(ITEM, PASSAGES[:k]) for k in (1, 2, 3)]
    assert complete(backend, prompts, settings, 2) == ["one", "", "one"]
    assert [len(p) for p, _ in backend.calls] == [2, 1] and all(s is settings for _, s in backend.calls)


def test_oracle_reader_options_and_refusal():
    with pytest.raises(RearankError, match=r"^gold reader: require must be one of any, all, share, got 'most'$"):
        GoldReader(require="most")
    reader = GoldReader(require="all", wrong_answer="dunno")
    assert reader.generated == 0 and reader.card.name == "plain"
    assert [o.answer for o in reader.read([(ITEM, PASSAGES[:1]), (ITEM, PASSAGES[:2])])] == ["dunno", "Ann"]
    assert reader.generated == 2
    reader.read([(ITEM, PASSAGES[:1])])
    assert reader.generated == 3
    assert GoldReader().read([(ITEM, PASSAGES[1:2])]) == [ReaderOutput("Ann", "Ann")]


def test_oracle_reader_cites_the_evidence_by_its_place_in_the_context():
    reader = GoldReader(template="barrag_generator")
    context = (PASSAGES[2], PASSAGES[1], Passage("9", "Z", "zeta"), PASSAGES[0])
    # evidence: "2" (has_answer) at 1, "1" (supporting) at 2, "0" (supporting) at 4
    assert reader.read([(ITEM, context)]) == [ReaderOutput(
        "<think>Doc [1] and Doc [2] and Doc [4] give the answer.</think><answer>Ann</answer>", "Ann")]


def _draw(seed, qid, *pids) -> float:
    """The noisy oracle's draw, derived by hand: the first 8 bytes of SHA-256 of the parts joined by 0x1f."""
    blob = "\x1f".join(map(str, (seed, qid, *pids))).encode("utf-8")
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big") / 2**64


def test_noisy_oracle_draws_per_seed_question_and_context():
    items = [QAItem(f"q{i}", "?", ("yes",), PASSAGES, frozenset({"0"})) for i in range(40)]
    contexts = [PASSAGES[:1], (PASSAGES[0], PASSAGES[2])]
    for seed in (0, 5):
        reader = NoisyGoldReader(p=0.5, wrong_answer="nope") if seed == 0 else NoisyGoldReader(
            p=0.5, seed=seed, wrong_answer="nope")
        got = [o.answer for ctx in contexts for o in reader.read([(item, ctx) for item in items])]
        want = ["yes" if _draw(seed, item.qid, *(p.pid for p in ctx)) < 0.5 else "nope"
                for ctx in contexts for item in items]
        assert got == want and 0 < got.count("yes") < len(got)


def test_noisy_oracle_bounds_and_passed_options():
    for p in (-0.01, 1.01):
        with pytest.raises(RearankError, match=rf"^noisy-gold reader: p must be in \[0, 1\], got {p}$"):
            NoisyGoldReader(p=p)
    batch = [(QAItem(f"q{i}", "?", ("yes",), PASSAGES, frozenset({"0", "1"})), PASSAGES[:1]) for i in range(30)]
    assert {o.answer for o in NoisyGoldReader(p=1.0).read(batch)} == {"yes"}
    assert {o.answer for o in NoisyGoldReader(p=0.0).read(batch)} == {WRONG_ANSWER}
    assert {o.answer for o in NoisyGoldReader(p=1.0, require="all", wrong_answer="no").read(batch)} == {"no"}
    assert NoisyGoldReader(template="arena").card.name == "arena"
    default = NoisyGoldReader()
    assert (default.p, default.seed, default.require, default.wrong_answer, default.card.name) == (
        0.8, 0, "any", WRONG_ANSWER, "plain")
    with pytest.raises(RearankError, match="require must be one of"):
        NoisyGoldReader(require="most")


class Closable(GoldReader):
    closed = 0

    def close(self) -> None:
        self.closed += 1


def test_spread_reader_name_parts_counts_and_close():
    with pytest.raises(RearankError, match=r"^a spread reader needs at least one reader$"):
        SpreadReader([])
    readers = [Closable(), GoldReader(), Closable()]
    spread = SpreadReader(readers)
    assert spread.name == "gold+gold+gold"
    items = [QAItem(f"q{i}", "?", (f"a{i}",), PASSAGES, frozenset({"0"})) for i in range(7)]
    out = spread.read([(item, PASSAGES[:1]) for item in items])
    assert [o.answer for o in out] == [f"a{i}" for i in range(7)]
    assert [r.generated for r in readers] == [3, 2, 2] and spread.generated == 7  # 7 = 3 + 2 + 2
    again = SpreadReader([GoldReader(), GoldReader(), GoldReader()])
    again.read([(item, PASSAGES[:1]) for item in items[:5]])
    assert [r.generated for r in again.readers] == [2, 2, 1]
    assert SpreadReader([BareReader(), GoldReader()]).generated == 0
    spread.close()
    assert [readers[0].closed, readers[2].closed] == [1, 1]
    two = [BareReader(), BareReader()]
    assert SpreadReader(two).read([(items[0], PASSAGES[:1])]) == [ReaderOutput("", "")]
    assert [r.batches for r in two] == [[1], []]  # an empty part is not sent


def test_spread_reader_reads_every_part_at_once_past_a_default_thread_pool():
    n = 33  # more than any default ThreadPoolExecutor's 32 workers
    met = threading.Barrier(n, timeout=60)

    class Waiting(BareReader):
        def read(self, batch):
            met.wait()  # every part must be in flight together
            return super().read(batch)

    spread = SpreadReader([Waiting() for _ in range(n)])
    items = [QAItem(f"q{i}", "?", ("a",), PASSAGES) for i in range(n)]
    assert len(spread.read([(item, PASSAGES[:1]) for item in items])) == n


class BareReader:
    """A reader keeping no count and nothing to close; ``batches`` has the size of each batch it was given."""

    name = "bare"

    def __init__(self) -> None:
        self.batches = []

    def read(self, batch):
        self.batches.append(len(batch))
        return [ReaderOutput("", "") for _ in batch]


def test_reader_names_put_the_rule_readers_first_and_leave_out_the_reranking_oracle():
    names = reader_names()
    assert names[:2] == ["gold", "noisy-gold"] and "oracle" not in names
    assert {"hf", "vllm", "vllm-async", "openai", "scorer"} <= set(names) and "qa-oracle" not in names


@pytest.fixture
def recording(monkeypatch):
    """A backend ``recording`` registered beside rearank's own; ``built`` keeps each one made."""
    built = []

    class Made(Recorder):
        name = "recording"

        def __init__(self, model=None, base_url=None, flavour="plain"):
            super().__init__()
            self.model, self.base_url, self.flavour = model, base_url, flavour
            built.append(self)

    monkeypatch.setitem(registry.BACKENDS._all(), "recording", lambda: Made)
    monkeypatch.setitem(registry.BACKENDS._loaded, "recording", Made)  # not an earlier test's class
    return built


def test_make_reader_builds_the_rule_readers_with_their_options():
    oracle = make_reader("gold", require="all", wrong_answer="w", template="arena")
    assert type(oracle) is GoldReader and (oracle.require, oracle.wrong_answer, oracle.card.name) == (
        "all", "w", "arena")
    noisy = make_reader("noisy-gold", p=0.3, seed=9, require="share", template="barrag_generator")
    assert type(noisy) is NoisyGoldReader and (noisy.p, noisy.seed, noisy.require, noisy.card.name) == (
        0.3, 9, "share", "barrag-generator")
    choices = ", ".join(reader_names())
    with pytest.raises(RearankError, match=rf"^unknown reader 'qa-oracle'; choose one of {choices}$"):
        make_reader("qa-oracle")


def test_make_reader_builds_an_llm_reader_through_the_registry(recording):
    settings, cache = SamplingSettings(max_new_tokens=3), ResponseCache()
    reader = make_reader("recording", "m", template="arena", settings=settings, cache=cache, batch_size=2,
                         max_passage_tokens=9, flavour="spicy")
    assert type(reader) is LLMReader and reader.name == "recording:m"
    assert (reader.template, reader.settings, reader.backend.cache, reader.batch_size, reader.max_passage_tokens) == (
        "arena", settings, cache, 2, 9)
    assert [(b.model, b.flavour) for b in recording] == [("m", "spicy")]
    plain = make_reader("recording")
    assert plain.name == "recording:embedded" and recording[-1].model is None
    assert (plain.template, plain.settings, plain.batch_size, plain.max_passage_tokens) == (
        "plain", SamplingSettings(max_new_tokens=32), 32, 300)
    assert make_reader("recording", base_url="http://one/v1").name == "recording:embedded"


def test_make_reader_spreads_a_list_of_urls_over_openai_readers_sharing_one_cache():
    settings = SamplingSettings(max_new_tokens=4)
    spread = make_reader("openai", "served", base_url=["http://a:1/v1", "http://b:2/v1"], template="arena",
                         settings=settings, batch_size=3, max_passage_tokens=11, timeout_s=5.0)
    assert type(spread) is SpreadReader and spread.name == "openai:served+openai:served"
    first, second = spread.readers
    assert [r.backend.backend.url for r in spread.readers] == ["http://a:1/v1/chat/completions",
                                                              "http://b:2/v1/chat/completions"]
    assert first.backend.cache is second.backend.cache and first.backend.backend.timeout_s == 5.0
    assert all((r.template, r.settings, r.batch_size, r.max_passage_tokens) == ("arena", settings, 3, 11)
               for r in spread.readers)
    cache = ResponseCache()
    given = make_reader("openai", "served", base_url=("http://a:1/v1",), cache=cache)
    assert given.readers[0].backend.cache is cache
    spread.close()
    given.close()


@pytest.mark.parametrize(("name", "urls"), [("recording", ["http://a/v1"]), ("openai", []), ("openai", ())])
def test_make_reader_refuses_a_url_list_off_openai_or_empty(recording, name, urls):
    with pytest.raises(RearankError, match=r"^a list of base_url needs the openai reader and at least one URL$"):
        make_reader(name, "m", base_url=urls)
