"""Edges of :mod:`rearank.backends.constrain` on a tiny character-level tokenizer (a fake, so that every allowed
token id is derived by hand): the vocabulary's tokens and word starts, the reasoning closed by the model or by the
budget, the text after a closing tag, a finished generation, the budgets, the vLLM request and the think outcome."""

from __future__ import annotations

import json
import re
import string
import sys

import pytest

from rearank.backends.constrain import (
    EXTRA_KEY,
    Decoding,
    DistinctIdsParser,
    answer_parser,
    backend_budget,
    build_vocabulary,
    check_constrain,
    model_eos_ids,
    request_args,
    structured_output,
    think_budget,
    think_outcome,
)
from rearank.errors import RearankError
from rearank.grammar import AnswerGrammar, IdList, Pattern, id_list_answer
from tests.conftest import require

BOS, EOS, PAD = 0, 1, 2
#: Ids 0-2 are special; then one token per character, a word-start token (``▁`` is a leading space, dropped at
#: the start of a text as sentencepiece does), a token that ends a tag and starts the next, and a partial byte.
PIECES = ["<s>", "</s>", "<pad>", *string.digits, *string.ascii_letters, *"[]<>/ \n,é", "▁ok", ">\n<", "\ufffd"]
ID = {piece: i for i, piece in enumerate(PIECES)}


class CharTokenizer:
    """A Hugging Face-like tokenizer that encodes one token per character and, by default, adds ``<s>`` and
    ``</s>`` around a text (as BERT-like and T5-like tokenizers add their own)."""

    all_special_ids = (BOS, EOS, PAD)

    def __init__(self, eos_token_id: int | None = EOS) -> None:
        self.eos_token_id = eos_token_id

    def __len__(self) -> int:
        return len(PIECES)

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        ids = [ID[char] for char in text]
        return [BOS, *ids, EOS] if add_special_tokens else ids

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
        return {"input_ids": self.encode(text, add_special_tokens)}

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        kept = [i for i in ids if not (skip_special_tokens and i in self.all_special_ids)]
        text = "".join(PIECES[i].replace("▁", " ") for i in kept)
        return text[1:] if kept and PIECES[kept[0]].startswith("▁") else text

    def batch_decode(self, batch: list[list[int]]) -> list[str]:
        return [self.decode(ids) for ids in batch]


@pytest.fixture(scope="module")
def vocabulary():
    require("lmformatenforcer", "the `hf` extra (lm-format-enforcer)")
    return build_vocabulary(CharTokenizer(), [EOS])


def ids(text: str) -> list[int]:
    return [ID[char] for char in text]


def steps(decoding: Decoding, generated: list[int]):
    """Step ``decoding`` through ``generated`` token by token, as a backend does; the last step's answer."""
    for k in range(len(generated)):
        decoding.step(generated[:k])
    return decoding.step(generated)


LISTWISE = id_list_answer(2, reasoning=True, tags=True)  # <think>…</think>\n<answer>[i] > [j]</answer>


def test_the_vocabulary_holds_each_regular_token_after_a_zero(vocabulary):
    # specials left out; the word-start token keeps its leading space and is flagged as a new word
    expected = [(i, piece.replace("▁", " "), piece == "▁ok") for i, piece in enumerate(PIECES) if i > PAD]
    assert vocabulary.data.regular_tokens == expected
    assert vocabulary.data.tokenizer_tree.new_word_tokens == {ID["▁ok"]}
    assert vocabulary.eos_ids == (EOS,) and vocabulary.encode("ab") == [ID["a"], ID["b"]]  # no <s> or </s> added


def test_the_filter_decodes_without_a_trailing_partial_character(vocabulary):
    decode = vocabulary.data.decoder
    assert decode(ids("a") + [ID["\ufffd"]]) == "a"
    assert decode([ID["\ufffd"]] + ids("a")) == "\ufffda" and decode(ids("aX")) == "aX"


def test_without_lm_format_enforcer_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "lmformatenforcer", None)
    with pytest.raises(RearankError, match=r"^constrained answers need lm-format-enforcer \(.+\); install "
                                           r"`rearank\[hf\]` or `pip install lm-format-enforcer`$"):
        build_vocabulary(CharTokenizer(), [EOS])


def test_constrain_values_false_and_true():
    assert check_constrain(False, "hf") is False
    with pytest.raises(RearankError, match=r"^backend option constrain=True \(hf\): choose one of off, answer$"):
        check_constrain(True, "hf")


def test_model_eos_ids_joins_the_tokenizer_and_the_generation_config(tmp_path):
    require("transformers", "the `hf` extra")
    for name, found in (("list", [1, 5]), ("int", 7)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "generation_config.json").write_text(json.dumps({"eos_token_id": found}))
    assert model_eos_ids(CharTokenizer(), str(tmp_path / "list")) == [1, 5]
    assert model_eos_ids(CharTokenizer(eos_token_id=9), str(tmp_path / "int")) == [7, 9]
    assert model_eos_ids(CharTokenizer(eos_token_id=None), str(tmp_path / "int")) == [7]
    (tmp_path / "none").mkdir()
    assert model_eos_ids(CharTokenizer(), str(tmp_path / "none")) == [1]  # no generation config: the tokenizer's


def test_request_args_name_every_setting():
    grammar = LISTWISE
    spec = {"grammar": grammar.to_dict(), "constrain": True, "max_think_tokens": 5, "max_new_tokens": 9}
    assert request_args(grammar, constrain=True, max_think_tokens=5, max_new_tokens=9) == {EXTRA_KEY: spec}
    text = request_args(grammar, constrain=True, max_think_tokens=5, max_new_tokens=9, as_text=True)[EXTRA_KEY]
    assert json.loads(text) == spec
    sent = structured_output("rearank", grammar, constrain=False, max_think_tokens=5, max_new_tokens=9)
    assert json.loads(sent["vllm_xargs"][EXTRA_KEY]) == {**spec, "constrain": False}


def test_server_regex_without_a_budget_and_with_no_room_to_think():
    # constraint off, no max_think_tokens: no bound on the reasoning
    free = structured_output("sglang", LISTWISE, constrain=False, max_think_tokens=None, max_new_tokens=9)["regex"]
    assert re.fullmatch(free, "<think>" + "x" * 50 + "</think>\n<answer>[2] > [1]</answer>")
    # 9 tokens leave no room for a reasoning before the longest answer (27 characters): an empty one only
    none = structured_output("sglang", LISTWISE, constrain=True, max_think_tokens=None, max_new_tokens=9)["regex"]
    assert re.fullmatch(none, "<think></think>\n<answer>[2] > [1]</answer>")
    assert not re.fullmatch(none, "<think>x</think>\n<answer>[2] > [1]</answer>")


def test_think_budget_at_zero():
    assert LISTWISE.max_answer_chars() == len("</think>\n<answer>[2] > [1]</answer>") == 35
    assert think_budget(LISTWISE, False, 0, 100) == 0  # no opening tokens by default
    assert think_budget(LISTWISE, True, None, 35) == 0 and think_budget(LISTWISE, True, None, 36) == 0
    assert think_budget(LISTWISE, True, None, 37) == 1


def test_backend_budget_counts_the_forced_opening_only_with_the_constraint(vocabulary):
    # <think> is 7 tokens here: a budget of 1 still lets the forced tag be written
    assert backend_budget(LISTWISE, vocabulary.encode, constrain=True, max_think_tokens=1, max_new_tokens=400) == 7
    assert backend_budget(LISTWISE, vocabulary.encode, constrain=False, max_think_tokens=0, max_new_tokens=400) == 0


def test_constrained_reasoning_bans_the_end_of_sequence(vocabulary):
    decoding = Decoding(LISTWISE, vocabulary, constrain=True, max_think_tokens=None, max_new_tokens=100)
    assert decoding.step([]) == ([ID["<"]], ())
    assert steps(decoding, ids("<think>hi")) == (None, (EOS,))


@pytest.mark.parametrize("tag", ["</think>", "</THINK>"])
def test_a_closing_tag_the_model_writes_starts_the_answer(vocabulary, tag):
    decoding = Decoding(LISTWISE, vocabulary, constrain=True, max_think_tokens=None, max_new_tokens=100)
    allowed, banned = steps(decoding, ids("<think>hi" + tag))
    assert sorted(allowed) == sorted([ID[" "], ID["\n"], ID["<"]]) and banned == ()  # up to 2 spaces, then <answer>


def test_text_after_the_closing_tag_in_its_token_is_part_of_the_answer(vocabulary):
    decoding = Decoding(LISTWISE, vocabulary, constrain=True, max_think_tokens=None, max_new_tokens=100)
    generated = ids("<think>hi</think") + [ID[">\n<"]]  # the last token closes the tag and opens the answer
    assert steps(decoding, generated) == ([ID["a"]], ())
    generated += ids("answer>[2] > [1]</answer>")
    assert steps(decoding, generated) == ([EOS], ())
    # finished: nothing is filtered any more, also after the padding a batch adds to a finished row
    assert decoding.step(generated + [EOS]) == (None, ()) and decoding.step(generated + [EOS, PAD]) == (None, ())


def test_a_budget_hit_forces_a_closing_tag_that_starts_like_the_reasoning(vocabulary):
    grammar = AnswerGrammar(IdList(2, 2), ("<t>", "X>"))
    decoding = Decoding(grammar, vocabulary, constrain=True, max_think_tokens=5, max_new_tokens=100)
    assert steps(decoding, ids("<t>XX")) == ([ID["X"]], ())  # the whole closing tag, not its tail


def test_unconstrained_a_closing_tag_the_model_writes_leaves_the_answer_free(vocabulary):
    decoding = Decoding(LISTWISE, vocabulary, constrain=False, max_think_tokens=None, max_new_tokens=100)
    assert steps(decoding, ids("hi</think>")) == (None, ())
    assert decoding.step(ids("hi</think>\n")) == (None, ())


def test_unconstrained_answer_only_is_free_from_the_first_token(vocabulary):
    decoding = Decoding(id_list_answer(3, reasoning=False, tags=False), vocabulary, constrain=False,
                        max_think_tokens=None, max_new_tokens=100)
    assert decoding.step([]) == (None, ()) and decoding.step(ids("[")) == (None, ())


def test_a_pattern_answer_allows_every_character_of_the_tokenizer(vocabulary):
    """A negated class (``[^<]``) takes the tokenizer's own characters (a newline, ``é``, a partial byte), not
    lm-format-enforcer's default alphabet; nothing is written before the first token."""
    decoding = Decoding(AnswerGrammar(Pattern("[^<]{1,4}", 4)), vocabulary, constrain=True, max_think_tokens=None,
                        max_new_tokens=100)
    allowed, banned = decoding.step([])
    assert sorted(allowed) == [i for i in range(PAD + 1, len(PIECES)) if i not in (ID["<"], ID[">\n<"])]
    assert banned == ()
    assert steps(decoding, ids("abcd")) == ([EOS], ())  # 4 characters: the end


def test_answer_parser_openings(vocabulary):
    def first(opening, think=None):
        parser = answer_parser(AnswerGrammar(IdList(2, 2), think, opening, "</answer>"), vocabulary)
        return parser, sorted(parser.get_allowed_characters())

    # after a reasoning, or before an opening that starts with whitespace, up to 2 spaces or newlines may come first
    assert first("<answer>", ("<think>", "</think>"))[1] == first("\n<answer>")[1] == sorted(" \n<")
    bare, allowed = first("<answer>")
    assert allowed == ["<"]
    for char in "<answer>":
        bare = bare.add_character(char)
    assert bare.get_allowed_characters() == "["


@pytest.mark.parametrize("at", range(1, 8))
def test_think_outcome_finds_the_first_token_that_completes_the_tag(at):
    pieces = ["x"] * (at - 1) + ["</think>"] + ["y"] * (7 - at)
    assert think_outcome(LISTWISE, None, lambda i: "".join(pieces[k] for k in i), list(range(7))) == (at, False)


def test_think_outcome_edges():
    pieces = ["<think>a</TH", "INK>", "[1]"]

    def decode(i):
        return "".join(pieces[k] for k in i)

    assert think_outcome(LISTWISE, None, decode, [0, 1, 2]) == (2, False)  # a tag in any case, split over tokens
    pieces[1] = "b"
    assert think_outcome(LISTWISE, None, decode, [0, 1, 2]) == (None, False)  # never closed
    assert think_outcome(LISTWISE, 3, decode, [0, 1, 2]) == (None, False)  # as long as the budget: not cut by it
    assert think_outcome(LISTWISE, 2, decode, [0, 1, 2]) == (2, True)


def test_an_id_list_refusal_names_the_character():
    with pytest.raises(ValueError, match=r"^'0' does not continue the id list$"):
        DistinctIdsParser(IdList(3, 3)).add_character("[").add_character("0")
