import re

import pytest

from rearank.errors import FormatError, RearankError
from rearank.methods.listwise.answer import parse_answer
from rearank.methods.templates import load_template
from rearank.prompts import (
    PassageBudget,
    PromptTemplate,
    build_messages,
    clean_passage,
    clean_passages,
    passage_text,
    passage_texts,
    truncate,
    truncate_texts,
)
from rearank.types import Candidate
from tests.methods import CharTokenizer

PASSAGES = ["Fleas live up to a year [3] in warm homes.", "Dogs   bark\n\na lot.", "Cats [ 12 ] sleep."]


def roles(messages):
    return [m["role"] for m in messages]


@pytest.mark.parametrize("name", ["rearank", "rankgpt"])
def test_builtin_layout_follows_the_released_prompts(name):
    """System, task exchange, per passage a user turn (acknowledged for rearank only), then the post prompt."""
    messages = build_messages("how long do fleas live", PASSAGES, load_template(name))
    acked = name == "rearank"
    per_passage = ["user", "assistant"] if acked else ["user"]
    assert roles(messages) == ["system", "user", "assistant"] + per_passage * len(PASSAGES) + ["user"]
    assert "how long do fleas live" in messages[1]["content"] and "3 passages" in messages[1]["content"]
    step = len(per_passage)
    for i in range(len(PASSAGES)):
        user = messages[3 + step * i]
        assert user["content"].startswith(f"[{i + 1}] ")
        if acked:
            assert f"[{i + 1}]" in messages[4 + step * i]["content"]
    post = messages[-1]["content"]
    assert "how long do fleas live" in post and str(len(PASSAGES)) in post
    assert ("<think>" in post and "<answer>" in post) == acked


def test_builtin_budgets_are_the_released_character_cuts():
    assert str(load_template("rearank").passage_budget) == "400 characters"
    assert str(load_template("rankgpt").passage_budget) == "300 characters"
    text = "ab " * 300  # 900 characters; collapsed: "ab ab ... ab" (899)
    rearank = build_messages("q", [text], load_template("rearank"))[3]["content"]
    rankgpt = build_messages("q", [text], load_template("rankgpt"))[3]["content"]
    assert rearank == "[1] " + ("ab " * 134)[:400]  # 400 characters: 133 x "ab " (399) + "a"
    assert rankgpt == "[1] " + "ab " * 100  # 300 characters: exactly 100 x "ab " (the cut keeps the space)


def test_bracketed_numbers_in_passages_are_neutralized():
    messages = build_messages("q", PASSAGES, load_template("rearank"))
    passage_turns = [m["content"] for m in messages if m["role"] == "user"][1:-1]  # after the task turn
    for i, content in enumerate(passage_turns, start=1):
        assert re.findall(r"\[\s*(\d+)\s*\]", content) == [str(i)]
    assert "(3)" in passage_turns[0] and "(12)" in passage_turns[2]
    # a model that echoes a passage instead of answering yields no fake identifier
    echoed = parse_answer(clean_passages(PASSAGES)[0], n=3)
    assert echoed.n_ids == 0 and echoed.status == "wrong_format"
    assert parse_answer(PASSAGES[0], n=3).n_ids == 1  # what the raw text would have produced


def test_whitespace_collapsed_and_beir_title_rendered():
    assert clean_passages(["a \n\t b  ", "[1] x [2]"]) == ["a b", "(1) x (2)"]
    assert clean_passage("a  [7]\nb", 2) == "a (7)"  # an int budget counts tokens: words without a tokenizer
    assert clean_passage("a  [7]\nb", "4c") == "a (7"
    titled = Candidate("d1", 1.0, text="Body text.", title="My Title")
    assert passage_text(titled) == "Title: My Title Content: Body text."
    assert passage_text(Candidate("d2", 1.0, text="Only body.")) == "Only body."


def test_truncation_by_words_and_by_tokenizer():
    text = " ".join(f"w{i}" for i in range(500))
    assert truncate_texts([text, "short text"], 300) == [" ".join(f"w{i}" for i in range(300)), "short text"]
    assert truncate_texts([text], None) == [text]
    assert truncate(text, 3) == "w0 w1 w2"
    tokenizer = CharTokenizer()
    assert truncate_texts([text, "w1 w2", "x" * 9], 10, tokenizer) == ["w0 w1 w2 w", "w1 w2", "x" * 9]
    assert tokenizer.seen == [text]  # texts shorter than the budget in bytes are not tokenized
    long = Candidate("d", 0.0, text=text)
    assert passage_text(long) == text  # no budget: no cut
    assert len(passage_text(long, "300 words").split()) == 300
    assert len(passage_text(long, 50, tokenizer=CharTokenizer())) <= 50
    assert passage_texts([long, Candidate("e", 0.0, text="tiny")], 2) == ["w0 w1", "tiny"]
    messages = build_messages("q", [text], load_template("rearank"), budget=5)
    assert messages[3]["content"] == "[1] w0 w1 w2 w3 w4"
    assert truncate_texts([text], "7 characters") == ["w0 w1 w"]


@pytest.mark.parametrize(("text", "expected"), [
    ("400 characters", PassageBudget(400, "characters")), ("400c", PassageBudget(400, "characters")),
    ("300 words", PassageBudget(300, "words")), ("12w", PassageBudget(12, "words")),
    ("300 tokens", PassageBudget(300, "tokens")), ("300", PassageBudget(300, "tokens")), (5, PassageBudget(5, "tokens")),
    ("none", PassageBudget(None)), (0, PassageBudget(None)),
])
def test_budget_forms(text, expected):
    assert PassageBudget.parse(text) == expected


@pytest.mark.parametrize("text", ["400 bytes", "-3c", "0 words", "lots", -1])
def test_bad_budget_is_a_clear_error(text):
    with pytest.raises(ValueError, match="passage budget"):
        PassageBudget.parse(text)


def write(tmp_path, text, name="custom.yaml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


GOOD = """\
name: mine
system: Rank {num} passages.
passage_user: "<{index}> {passage}"
passage_assistant: ok {{fine}}
post: |-
  Query: {query}
  Answer as <answer>[a] > [b]</answer>.
"""


def test_user_template_file_loads_and_builds(tmp_path):
    tpl = load_template(write(tmp_path, GOOD))
    assert isinstance(tpl, PromptTemplate) and tpl.name == "mine"
    messages = build_messages("fleas", ["x", "y"], str(tmp_path / "custom.yaml"))
    assert messages[0]["content"] == "Rank 2 passages."
    assert messages[1]["content"] == "<1> x" and messages[2]["content"] == "ok {fine}"
    assert messages[-1]["content"].startswith("Query: fleas")
    assert load_template(tpl) is tpl


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (GOOD.replace("{query}", "{qeury}"), "field 'post': unknown placeholder {qeury}"),
        (GOOD.replace("Query: {query}", "Query"), "field 'post': missing required placeholder {query}"),
        (GOOD.replace("{passage}", "{passage!r}"), "takes no format spec"),
        (GOOD.replace("<{index}>", "<{}>"), "positional placeholder"),
        (GOOD.replace("ok {{fine}}", "ok {fine"), "field 'passage_assistant'"),
        (GOOD.replace("post: |-", "passage_budget: 12 bytes\npost: |-"), "passage budget"),
        (GOOD + "neutralize_ids: maybe\n", "'neutralize_ids' must be true or false"),
        (GOOD + "layout: inline\n", "layout inline needs the placeholder {passages}"),
        (GOOD.replace("Query: {query}", "Query: {query} {passages}"), "{passages} needs 'layout: inline'"),
        (GOOD.replace("<{index}>", "<{index}> {passages}"), "unknown placeholder {passages}"),
        (GOOD + "postt: typo\n", "unknown field 'postt'"),
        (GOOD + "prefix_user: hello {num}\n", "give both 'prefix_user' and 'prefix_assistant'"),
        (GOOD.replace("Rank {num} passages.", "[unclosed"), "invalid YAML"),
        ("- just\n- a list\n", "must be a YAML mapping"),
        (GOOD.replace("Rank {num} passages.", "42"), "field 'system' must be text"),
    ],
)
def test_bad_template_errors_name_file_and_field(tmp_path, text, needle):
    path = write(tmp_path, text)
    with pytest.raises(FormatError) as err:
        load_template(path)
    assert needle in str(err.value)
    assert str(path) in str(err.value)


def test_unknown_placeholder_error_gives_line(tmp_path):
    path = write(tmp_path, GOOD.replace("{query}", "{topic}"))
    with pytest.raises(FormatError) as err:
        load_template(path)
    assert err.value.line == 5  # the line of the `post:` key


def test_unknown_template_name_is_a_clear_error():
    with pytest.raises(RearankError, match="not a builtin"):
        load_template("rearnk")
