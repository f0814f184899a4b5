"""A template written from the paper's appendix renders the published layout byte for byte."""

import json
from pathlib import Path

import pytest

from rearank.errors import RearankError
from rearank.methods.templates import load_template
from rearank.prompts import build_messages
from rearank.prompts.check import check_rows, first_difference, read_rows
from rearank.types import Candidate

APPENDIX = Path(__file__).resolve().parents[1] / "fixtures" / "rearank_appendix.yaml"
QUERY = "how long do fleas live"
# 44 x "alpha\n\n beta\t" collapses to "alpha beta alpha beta ..." (11 characters per "alpha beta ", 483 in all)
LONG = "alpha\n\n beta\t" * 44
BEIR = Candidate("d2", 1.0, text="Adult fleas live\n two to three months.", title="Flea biology")
SHORT = Candidate("d3", 1.0, text="  Dogs bark.  ", title="  ")  # a blank title gets no Title/Content prefix

SYSTEM = "You are DeepSeek-R1, an intelligent assistant that can rank passages based on their relevancy to the query."
EXPECTED = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": "I will provide you with 3 passages, each indicated by a numerical identifier []. "
                                "Rank the passages based on their relevance to the search query: "
                                "how long do fleas live."},
    {"role": "assistant", "content": "Okay, please provide the passages."},
    # the first 400 characters: 36 x "alpha beta " (396) + "alph"
    {"role": "user", "content": "[1] " + "alpha beta " * 36 + "alph"},
    {"role": "assistant", "content": "Received passage [1]."},
    {"role": "user", "content": "[2] Title: Flea biology Content: Adult fleas live two to three months."},
    {"role": "assistant", "content": "Received passage [2]."},
    {"role": "user", "content": "[3] Dogs bark."},
    {"role": "assistant", "content": "Received passage [3]."},
    {"role": "user", "content": "Search Query: how long do fleas live.\n"
                                "Rank the 3 passages above based on their relevance to the search query. First "
                                "reason step by step about each passage inside <think> </think>, then give the "
                                "ranking inside <answer> </answer> in descending order of relevance using "
                                "identifiers, in the format [] > [], e.g. <answer> [2] > [1] </answer>."},
]


def test_appendix_template_renders_the_hand_built_messages():
    messages = build_messages(QUERY, [LONG, BEIR, SHORT], APPENDIX)
    assert messages == EXPECTED
    assert len(messages[3]["content"]) == len("[1] ") + 400
    assert first_difference("x", EXPECTED, messages) is None


def test_first_difference_names_message_and_offset():
    changed = [dict(m) for m in EXPECTED]
    changed[5]["content"] = changed[5]["content"].replace("months", "weeks")
    diff = first_difference("row 7", EXPECTED, changed)
    # "[2] Title: Flea biology Content: Adult fleas live two to three " is 63 characters
    assert (diff.where, diff.message, diff.offset) == ("row 7", 5, 63)
    assert diff.stored.endswith("three months.") and diff.rendered.endswith("three weeks.")
    missing = first_difference("row 0", EXPECTED, EXPECTED[:-1])
    assert missing.message == len(EXPECTED) - 1 and missing.rendered.startswith("<(none)>")


def test_inline_layout_puts_every_passage_in_one_user_message(tmp_path):
    path = tmp_path / "inline.yaml"
    path.write_text('layout: inline\npassage_budget: 5 characters\npassage_user: "[{index}]. {passage}"\n'
                    'post: "Q: {query}\\n{passages}\\nScore all {num}."\n', encoding="utf-8")
    messages = build_messages("q", ["abcdefgh", "xy  z"], load_template(path))
    assert messages == [{"role": "user", "content": "Q: q\n[1]. abcde\n[2]. xy z\nScore all 2."}]


def test_check_reads_chat_jsonl_with_inline_passages(tmp_path):
    good = {"messages": EXPECTED, "query": QUERY,
            "passages": [LONG, {"title": "Flea biology", "text": BEIR.text}, SHORT.text]}
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "query": "other"}) + "\n", encoding="utf-8")
    count, diff = check_rows(read_rows(path), APPENDIX)
    assert count == 1 and diff.where == f"{path}:2" and diff.message == 1
    assert check_rows(read_rows(path), load_template("rearank"))[0] == 0  # our own wording differs from the appendix's
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"query": "q", "passages": ["x"]}) + "\n", encoding="utf-8")
    with pytest.raises(RearankError, match=r"bad.jsonl:1: no chat messages"):
        list(read_rows(bad))
    no_query = tmp_path / "noq.jsonl"
    no_query.write_text(json.dumps({"messages": EXPECTED, "passages": ["x"]}) + "\n", encoding="utf-8")
    with pytest.raises(RearankError, match="no query text"):
        check_rows(read_rows(no_query), APPENDIX)
