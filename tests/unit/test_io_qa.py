"""QA loaders on small hand-written records: ids, supporting ids, answers, sniffing, FormatError locations."""

from __future__ import annotations

import gzip
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rearank.errors import FormatError
from rearank.io.qa import FORMATS, load_qa

HOTPOT = {
    "_id": "h1",
    "question": "Q?",
    "answer": "A",
    "supporting_facts": [["T2", 0], ["T0", 1], ["T2", 1]],
    "context": [["T0", ["First.", " Second."]], ["T1", ["x"]], ["T2", ["y"]]],
}
WIKI = {**HOTPOT, "_id": "w1", "evidences": [], "context": [["T0", ["One.", "Two."]], ["T2", ["z"]]]}
MUSIQUE = {
    "id": "m1",
    "question": "Q?",
    "answer": "Stanley",
    "answer_aliases": ["Stan", "Stanley"],
    "paragraphs": [
        {"idx": 3, "title": "a", "paragraph_text": "p3", "is_supporting": False},
        {"idx": 7, "title": "b", "paragraph_text": "p7", "is_supporting": True},
    ],
}
DPR = {
    "question": "who?",
    "answers": ["Ann", "Anne"],
    "ctxs": [
        {"id": "wiki:5", "title": "t", "text": "Ann", "hasanswer": True, "isgold": True},
        {"title": "u", "text": "Bob", "hasanswer": False},
    ],
}
FLASH = {"id": "train_0", "question": "who?", "golden_answers": ["Ann"]}


def write_jsonl(path, records):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as handle:
        for r in records:
            handle.write(json.dumps(r) + "\n")
    return path


def test_hotpotqa_ids_support_and_request(tmp_path):
    path = tmp_path / "h.json"
    path.write_text(json.dumps([HOTPOT]))
    (item,) = load_qa(path)
    assert item.source == "hotpotqa" and item.answers == ("A",)
    assert [p.pid for p in item.passages] == ["0", "1", "2"]
    assert item.supporting == {"0", "2"}
    assert item.passages[0].text == "First. Second."
    request = item.to_request()
    assert [c.docid for c in request.candidates] == ["0", "1", "2"]
    assert [c.score for c in request.candidates] == [3.0, 2.0, 1.0]
    assert request.candidates[2].title == "T2" and request.query.text == "Q?"


def test_2wiki_sniffed_and_sentences_spaced(tmp_path):
    (item,) = load_qa(write_jsonl(tmp_path / "w.jsonl", [WIKI]))
    assert item.source == "2wiki"
    assert item.passages[0].text == "One. Two."
    assert item.supporting == {"0", "1"}


def test_musique_idx_aliases_support(tmp_path):
    (item,) = load_qa(write_jsonl(tmp_path / "m.jsonl", [MUSIQUE]))
    assert [p.pid for p in item.passages] == ["3", "7"]
    assert item.supporting == {"7"}
    assert item.answers == ("Stanley", "Stan")


def test_dpr_gz_ids_hasanswer_gold(tmp_path):
    items = load_qa(write_jsonl(tmp_path / "d.jsonl.gz", [DPR, DPR]))
    assert [i.qid for i in items] == ["0", "1"]
    assert [p.pid for p in items[0].passages] == ["wiki:5", "1"]
    assert [p.has_answer for p in items[0].passages] == [True, False]
    assert items[0].supporting == {"wiki:5"}


def test_flashrag_without_ctxs_and_limit(tmp_path):
    items = load_qa(write_jsonl(tmp_path / "f.jsonl", [FLASH, FLASH, FLASH]), limit=2)
    assert len(items) == 2
    assert items[0].qid == "train_0" and items[0].passages == () and items[0].source == "flashrag"


def test_explicit_format_mismatch_names_line(tmp_path):
    path = write_jsonl(tmp_path / "x.jsonl", [DPR, {"question": "q"}])
    with pytest.raises(FormatError, match=r"x\.jsonl:2: missing field 'answers'"):
        load_qa(path, fmt="dpr")


def test_malformed_jsonl_names_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(MUSIQUE) + "\n\n{not json\n")
    with pytest.raises(FormatError, match=r"bad\.jsonl:3:"):
        load_qa(path)


def test_malformed_list_names_record(tmp_path):
    bad = {**HOTPOT, "context": [["only-title"]]}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([HOTPOT, bad]))
    with pytest.raises(FormatError, match=r"bad\.json: record 1: context\[0\]"):
        load_qa(path)


def test_unknown_keys_and_format(tmp_path):
    path = write_jsonl(tmp_path / "u.jsonl", [{"foo": 1}])
    with pytest.raises(FormatError, match="cannot tell the QA format"):
        load_qa(path)
    with pytest.raises(ValueError, match="unknown QA format"):
        load_qa(path, fmt="squad")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
KEYS = ["_id", "id", "question", "answer", "answers", "golden_answers", "answer_aliases", "context",
        "supporting_facts", "paragraphs", "ctxs", "evidences"]


@settings(deadline=None, max_examples=150,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(KEYS), json_values, max_size=6), st.sampled_from(["auto", *FORMATS]))
def test_fuzzed_records_load_or_raise_format_error(tmp_path, record, fmt):
    path = tmp_path / "fuzz.jsonl"
    path.write_text(json.dumps(record) + "\n")
    try:
        items = load_qa(path, fmt)
    except FormatError as err:
        assert "fuzz.jsonl:1:" in str(err)
    else:
        assert len(items) == 1 and isinstance(items[0].question, str) and items[0].answers
