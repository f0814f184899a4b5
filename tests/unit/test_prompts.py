import re

import pytest

from rearank.answer import parse_answer
from rearank.errors import FormatError, RearankError
from rearank.prompts import (
    BUILTINS,
    PromptTemplate,
    build_messages,
    clean_passage,
    clean_passages,
    load_template,
    passage_text,
    passage_texts,
    truncate,
    truncate_texts,
)
from rearank.types import Candidate

PASSAGES = ["Fleas live up to a year [3] in warm homes.", "Dogs   bark\n\na lot.", "Cats [ 12 ] sleep."]


def roles(messages):
    return [m["role"] for m in messages]


@pytest.mark.parametrize("name", BUILTINS)
def test_builtin_structure_system_passage_pairs_then_post(name):
    messages = build_messages("how long do fleas live", PASSAGES, name)
    tpl = load_template(name)
    head = 3 if tpl.prefix_user else 1
    assert roles(messages) == ["system"] + ["user", "assistant"] * (len(PASSAGES) + (head == 3)) + ["user"]
    for i in range(len(PASSAGES)):
        user, reply = messages[head + 2 * i], messages[head + 2 * i + 1]
        assert user["content"].startswith(f"[{i + 1}] ")
        assert f"[{i + 1}]" in reply["content"]
    post = messages[-1]["content"]
    assert "how long do fleas live" in post and str(len(PASSAGES)) in post
    if name == "rearank":
        assert "<think>" in post and "<answer>" in post
    else:
        assert "how long do fleas live" in messages[1]["content"] and "3 passages" in messages[1]["content"]


def test_bracketed_numbers_in_passages_are_neutralized():
    messages = build_messages("q", PASSAGES, "rearank")
    passage_turns = [m["content"] for m in messages if m["role"] == "user"][:-1]
    for i, content in enumerate(passage_turns, start=1):
        assert re.findall(r"\[\s*(\d+)\s*\]", content) == [str(i)]
    assert "(3)" in passage_turns[0] and "(12)" in passage_turns[2]
    # a model that echoes a passage instead of answering yields no fake identifier
    echoed = parse_answer(clean_passages(PASSAGES)[0], n=3)
    assert echoed.n_ids == 0 and echoed.status == "wrong_format"
    assert parse_answer(PASSAGES[0], n=3).n_ids == 1  # what the raw text would have produced


def test_whitespace_collapsed_and_beir_title_rendered():
    assert clean_passages(["a \n\t b  ", "[1] x [2]"]) == ["a b", "(1) x (2)"]
    assert clean_passage("a  [7]\nb", 2) == "a (7)"
    titled = Candidate("d1", 1.0, text="Body text.", title="My Title")
    assert passage_text(titled) == "Title: My Title Content: Body text."
    assert passage_text(Candidate("d2", 1.0, text="Only body.")) == "Only body."


class CharTokenizer:
    """One token per character: enough to check token-budget truncation."""

    def __init__(self):
        self.seen = []

    def __call__(self, texts, add_special_tokens=False):
        self.seen.extend(texts)
        return {"input_ids": [[ord(c) for c in text] for text in texts]}

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i) for i in ids)


def test_truncation_by_words_and_by_tokenizer():
    text = " ".join(f"w{i}" for i in range(500))
    assert truncate_texts([text, "short text"], 300) == [" ".join(f"w{i}" for i in range(300)), "short text"]
    assert truncate_texts([text], None) == [text]
    assert truncate(text, 3) == "w0 w1 w2"
    tokenizer = CharTokenizer()
    assert truncate_texts([text, "w1 w2", "x" * 9], 10, tokenizer) == ["w0 w1 w2 w", "w1 w2", "x" * 9]
    assert tokenizer.seen == [text]  # texts shorter than the budget in bytes are not tokenized
    long = Candidate("d", 0.0, text=text)
    assert len(passage_text(long).split()) == 300
    assert len(passage_text(long, max_tokens=50, tokenizer=CharTokenizer())) <= 50
    assert passage_texts([long, Candidate("e", 0.0, text="tiny")], 2) == ["w0 w1", "tiny"]
    messages = build_messages("q", [text], "rearank", max_passage_tokens=5)
    assert messages[1]["content"] == "[1] w0 w1 w2 w3 w4"


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
        (GOOD.replace("passage_assistant: ok {{fine}}\n", ""), "missing field 'passage_assistant'"),
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
