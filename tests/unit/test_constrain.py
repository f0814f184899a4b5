"""Constrained answers and the think budget (:mod:`rearank.backends.constrain`) on the embedded model's real
tokenizer, driven by random logits in place of a model: whatever the "model" prefers, the text parses cleanly
with the method's own parser."""

import random
import re

import numpy as np
import pytest

from rearank.backends.constrain import (
    Decoding,
    DistinctIdsParser,
    build_vocabulary,
    check_constrain,
    think_budget,
    think_outcome,
)
from rearank.errors import RearankError
from rearank.grammar import AnswerGrammar, IdList, id_list_answer
from rearank.methods import Listwise
from rearank.methods.arena.grammar import arena_grammar
from rearank.methods.arena.parser import parse_arena
from rearank.methods.barrag.grammar import selection_grammar
from rearank.methods.barrag.parser import parse_selection
from rearank.methods.groupwise.parser import parse_scores, scores_grammar
from rearank.methods.listwise.answer import format_answer, parse_answer
from tests.conftest import require


@pytest.fixture(scope="module")
def vocabulary():
    transformers = require("transformers", "the `hf` extra")
    require("lmformatenforcer", "the `hf` extra (lm-format-enforcer)")
    from rearank.backends.models import resolve_model

    # its tokenizer_config names TokenizersBackend (PreTrainedTokenizerFast), what AutoTokenizer loads, without
    # the model classes AutoTokenizer imports (seconds in each of the mutation run's test sessions)
    tokenizer = transformers.PreTrainedTokenizerFast.from_pretrained(resolve_model("embedded").path)
    return build_vocabulary(tokenizer, [tokenizer.convert_tokens_to_ids("<|im_end|>")])


def run(grammar, vocabulary, *, seed, constrain=True, max_think_tokens=None, max_new_tokens=400, bias=None,
        weight=4.0):
    """Generate with random logits through a :class:`Decoding`; ``bias`` favours some token ids by ``weight`` (a
    "model" that likes them). Returns the token ids (end-of-sequence included) and the decoding."""
    rng = np.random.default_rng(seed)
    decoding = Decoding(grammar, vocabulary, constrain=constrain, max_think_tokens=max_think_tokens,
                        max_new_tokens=max_new_tokens)
    size = len(vocabulary.tokenizer)
    ids: list[int] = []
    while len(ids) < max_new_tokens:
        logits = rng.standard_normal(size)
        if bias:
            logits[list(bias)] += weight
        allowed, banned = decoding.step(ids)
        if allowed is not None:
            choice = max(allowed, key=lambda t: logits[t])
        else:
            logits[list(banned)] = -np.inf
            choice = int(np.argmax(logits))
        ids.append(choice)
        if choice in vocabulary.eos_ids:
            break
    return ids, decoding


def text_of(vocabulary, ids):
    return vocabulary.decode(ids)


def test_distinct_ids_parser_accepts_permutations_and_refuses_repeats():
    body = IdList(12, 12)
    for seed in range(20):
        order = list(range(12))
        random.Random(seed).shuffle(order)
        parser = DistinctIdsParser(body)
        for char in format_answer(order):
            parser = parser.add_character(char)
        assert parser.can_end() and parser.get_allowed_characters() == ""
    parser = DistinctIdsParser(body)
    for char in "[1] > [":
        parser = parser.add_character(char)
    assert set(parser.add_character("1").get_allowed_characters()) == {"0", "1", "2"}  # [1] is used: only 10-12
    assert set(parser.get_allowed_characters()) == set("23456789") | {"1"}
    assert "0" not in parser.get_allowed_characters()  # no leading zero
    with pytest.raises(ValueError):
        parser.add_character("0")


@pytest.mark.parametrize("n", [2, 9, 20])
def test_listwise_answers_are_full_permutations_whatever_the_logits(vocabulary, n):
    grammar = Listwise().answer_grammar(n)
    assert grammar.think == ("<think>", "</think>")
    digits = [vocabulary.encode(str(d))[0] for d in range(10)]
    for seed in range(3):
        ids, _ = run(grammar, vocabulary, seed=seed, max_think_tokens=12, bias=digits)
        text = text_of(vocabulary, ids)
        parsed = parse_answer(text, n)
        assert parsed.status == "ok" and parsed.strict_format and parsed.has_tags, text
        assert re.fullmatch(r"(?s)<think>.*</think>\s*<answer>.*</answer>", text)


def test_answer_only_template_is_constrained_from_the_first_token(vocabulary):
    grammar = Listwise(template="rankgpt").answer_grammar(20)
    assert grammar.think is None and grammar.opening == ""
    ids, decoding = run(grammar, vocabulary, seed=1)
    text = text_of(vocabulary, ids)
    assert parse_answer(text, 20).status == "ok" and text.startswith("[")
    assert think_outcome(grammar, decoding.budget, vocabulary.decode, ids) == (None, False)


def test_the_answer_fits_in_max_new_tokens(vocabulary):
    """With the constraint, the reasoning is closed early enough for the longest answer to fit."""
    grammar = Listwise().answer_grammar(20)
    ids, decoding = run(grammar, vocabulary, seed=3, max_new_tokens=200)
    assert len(ids) <= 200 and ids[-1] in vocabulary.eos_ids
    assert parse_answer(text_of(vocabulary, ids), 20).status == "ok"
    assert decoding.budget == think_budget(grammar, True, None, 200) == 200 - grammar.max_answer_chars() - 1
    assert think_budget(grammar, True, 2, 200, opening_tokens=3) == 3 and think_budget(grammar, False, None, 9) is None


@pytest.mark.parametrize("budget", [4, 8, 30])
def test_max_think_tokens_caps_the_reasoning(vocabulary, budget):
    grammar = Listwise().answer_grammar(5)
    for constrain in (True, False):
        ids, decoding = run(grammar, vocabulary, seed=budget, constrain=constrain, max_think_tokens=budget,
                            max_new_tokens=budget + 60)
        think_tokens, hit = think_outcome(grammar, decoding.budget, vocabulary.decode, ids)
        assert hit and think_tokens == budget
        text = text_of(vocabulary, ids)
        head = text_of(vocabulary, ids[:budget])
        assert "</think>" not in head and text.startswith(head + "</think>\n<answer>"), text
        if constrain:
            assert parse_answer(text, 5).status == "ok"


def test_a_reasoning_the_model_closes_is_not_a_budget_hit(vocabulary):
    grammar = Listwise().answer_grammar(4)
    close = vocabulary.encode("</think>")
    ids, decoding = run(grammar, vocabulary, seed=0, max_think_tokens=50, bias=close)
    think_tokens, hit = think_outcome(grammar, decoding.budget, vocabulary.decode, ids)
    text = text_of(vocabulary, ids)
    assert not hit and think_tokens < 50 and "</think>" in text_of(vocabulary, ids[:think_tokens])
    assert parse_answer(text, 4).status == "ok"


def test_without_constraint_or_budget_nothing_is_filtered(vocabulary):
    decoding = Decoding(Listwise().answer_grammar(4), vocabulary, constrain=False, max_think_tokens=None,
                        max_new_tokens=100)
    assert decoding.step([]) == (None, ()) and decoding.step([5, 6, 7]) == (None, ())


@pytest.mark.parametrize("n", [3, 10])
def test_groupwise_scores_are_complete_json_in_range(vocabulary, n):
    grammar = scores_grammar(n)
    for seed in range(2):
        ids, _ = run(grammar, vocabulary, seed=seed, max_think_tokens=10)
        parsed = parse_scores(text_of(vocabulary, ids), n)
        assert parsed.status == "ok" and parsed.n_scored == n and all(0 <= s <= 10 for s in parsed.scores)


def test_barrag_selection_has_k_distinct_ids(vocabulary):
    grammar = selection_grammar(25)
    for seed in range(3):
        ids, _ = run(grammar, vocabulary, seed=seed, max_think_tokens=10)
        parsed = parse_selection(text_of(vocabulary, ids), 25)
        assert parsed.valid and len(parsed.ids) == 5 and parsed.n_out_of_range == 0
    assert selection_grammar(3).body == IdList(3, 3, ", ")


def test_arena_output_has_the_three_tags_in_order(vocabulary):
    grammar = arena_grammar(10)
    close = vocabulary.encode("</")  # a "model" eager to close tags, so the free-text parts end soon (each of their
    ids, _ = run(grammar, vocabulary, seed=4, max_new_tokens=200, bias=close, weight=8.0)  # steps walks the vocabulary)
    parsed = parse_arena(text_of(vocabulary, ids))
    assert parsed.format_ok and parsed.answer and all(1 <= i <= 10 for i in parsed.relevance)


def test_server_regex_matches_what_the_token_filter_allows(vocabulary):
    for grammar in (Listwise().answer_grammar(7), Listwise(template="rankgpt").answer_grammar(7), scores_grammar(4),
                    selection_grammar(8, 3)):
        ids, _ = run(grammar, vocabulary, seed=5, max_think_tokens=6)
        text = text_of(vocabulary, ids)
        assert re.fullmatch(grammar.regex(), text), (grammar.regex(), text)
    assert not re.fullmatch(IdList(3, 3).regex(), "[1] > [4] > [2]") and re.fullmatch(IdList(3, 3).regex(), "[3] > [1] > [2]")


def test_grammar_round_trips_as_plain_data():
    for grammar in (id_list_answer(20, reasoning=True, tags=True), scores_grammar(5), arena_grammar(20),
                    AnswerGrammar(IdList(4, 2, ", "))):
        assert AnswerGrammar.from_dict(grammar.to_dict()) == grammar


def test_constrain_option_values():
    assert check_constrain("answer", "hf") and not check_constrain("off", "hf") and not check_constrain(None, "hf")
    with pytest.raises(RearankError, match="constrain='json' \\(hf\\): choose one of off, answer"):
        check_constrain("json", "hf")
