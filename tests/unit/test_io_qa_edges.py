"""QA reader edges found by mutation testing: every field of an item in each format, the field fallbacks (DPR
``has_answer``, FlashRAG ``contents``, positions for missing ids) and each error's message."""

import gzip
import json

import pytest

from rearank.errors import FormatError
from rearank.io.qa import iter_qa, load_qa
from rearank.types import Passage, QAItem


def jsonl(tmp_path, *records, name="qa.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def load(tmp_path, records, fmt="auto"):
    return load_qa(jsonl(tmp_path, *records), fmt)


MUSIQUE = {"id": "2hop_1", "question": "Who?", "answer": "Ann", "answer_aliases": ["Annie", "Ann"],
           "paragraphs": [{"idx": 4, "title": "A", "paragraph_text": "Ann was.", "is_supporting": True},
                          {"title": "B", "text": "other", "is_supporting": "yes"},
                          {"idx": 9}]}


def test_musique_item(tmp_path):
    assert load(tmp_path, [MUSIQUE]) == [QAItem(
        qid="2hop_1", question="Who?", answers=("Ann", "Annie"),
        passages=(Passage("4", "A", "Ann was."), Passage("1", "B", "other"), Passage("9", "", "")),
        supporting=frozenset({"4"}), source="musique")]


def test_musique_without_id_uses_its_position(tmp_path):
    record = {k: v for k, v in MUSIQUE.items() if k not in ("id", "answer_aliases")}
    [first, second] = load(tmp_path, [record, record])
    assert (first.qid, second.qid, second.answers) == ("0", "1", ("Ann",))


def test_dpr_item_and_fallbacks(tmp_path):
    record = {"question": "Who?", "answers": ["Ann"],
              "ctxs": [{"id": "w7", "title": "A", "text": "Ann", "hasanswer": True, "isgold": True},
                       {"id": "", "title": None, "text": "x", "has_answer": 0},
                       {"contents": "from contents"}]}
    assert load(tmp_path, [record]) == [QAItem(
        qid="0", question="Who?", answers=("Ann",),
        passages=(Passage("w7", "A", "Ann", True), Passage("1", "", "x", False), Passage("2", "", "from contents")),
        supporting=frozenset({"w7"}), source="dpr")]


def test_flashrag_item(tmp_path):
    record = {"id": "f1", "question": "Who?", "golden_answers": "Ann", "ctxs": [{"text": "t", "isgold": 1}]}
    assert load(tmp_path, [record]) == [QAItem(
        qid="f1", question="Who?", answers=("Ann",), passages=(Passage("0", "", "t"),), supporting=frozenset(),
        source="flashrag")]
    assert load(tmp_path, [{"question": "Who?", "golden_answers": ["Ann"]}])[0].passages == ()


def test_hotpotqa_and_2wiki_items(tmp_path):
    hotpot = {"_id": "h1", "question": "Who?", "answer": "Ann",
              "context": [["A", ["Ann was", " here."]], ["B", "plain"]], "supporting_facts": [["A", 0]]}
    assert load(tmp_path, [hotpot]) == [QAItem(
        qid="h1", question="Who?", answers=("Ann",),
        passages=(Passage("0", "A", "Ann was here."), Passage("1", "B", "plain")),
        supporting=frozenset({"0"}), source="hotpotqa")]
    wiki = {**{k: v for k, v in hotpot.items() if k != "_id"}, "id": "w1", "evidences": [],
            "context": [["A", ["Ann was", "here."]]], "supporting_facts": None}
    [item] = load(tmp_path, [wiki])
    assert (item.qid, item.source, item.passages[0].text, item.supporting) == ("w1", "2wiki", "Ann was here.",
                                                                               frozenset())
    no_evidences = {k: v for k, v in wiki.items() if k != "evidences"}
    assert load(tmp_path, [{**no_evidences, "entity_ids": "x"}])[0].source == "2wiki"
    assert load(tmp_path, [no_evidences])[0].source == "hotpotqa"
    assert load(tmp_path, [{k: v for k, v in wiki.items() if k != "id"}])[0].qid == "0"


@pytest.mark.parametrize(("record", "fmt", "message"), [
    ({**MUSIQUE, "paragraphs": {}}, "auto", "'paragraphs' must be a list"),
    ({**MUSIQUE, "paragraphs": ["p"]}, "auto", "paragraphs[0] must be an object"),
    ({**MUSIQUE, "paragraphs": [{"idx": [1]}]}, "auto", "paragraphs[0].idx must be a string, got list"),
    ({**MUSIQUE, "paragraphs": [{"paragraph_text": None}]}, "auto",
     "paragraphs[0].paragraph_text must be a string, got NoneType"),
    ({**MUSIQUE, "paragraphs": [{"title": True}]}, "auto", "paragraphs[0].title must be a string, got bool"),
    ({**MUSIQUE, "answer_aliases": "Annie"}, "auto", "'answer_aliases' must be a list"),
    ({**MUSIQUE, "answer_aliases": [None]}, "auto", "'answer_aliases' must be a string, got NoneType"),
    ({**MUSIQUE, "id": None}, "auto", "'id' must be a string, got NoneType"),
    ({**MUSIQUE, "question": None}, "auto", "'question' must be a string, got NoneType"),
    ({**MUSIQUE, "answer": []}, "auto", "'answer' must be a string or a non-empty list of strings, got []"),
    ({"question": "q", "answers": ["a"], "ctxs": 3}, "auto", "'ctxs' must be a list"),
    ({"question": "q", "answers": ["a"], "ctxs": [3]}, "auto", "ctxs[0] must be an object"),
    ({"question": "q", "answers": ["a"], "ctxs": [{"id": [1]}]}, "auto", "ctxs[0].id must be a string, got list"),
    ({"question": "q", "answers": ["a"], "ctxs": [{"title": ["t"]}]}, "auto",
     "ctxs[0].title must be a string, got list"),
    ({"question": "q", "answers": ["a"], "ctxs": [{"text": None}]}, "auto", "ctxs[0].text must be a string, got NoneType"),
    ({"question": "q", "answers": ["a"], "id": None}, "auto", "'id' must be a string, got NoneType"),
    ({"question": None, "answers": ["a"]}, "auto", "'question' must be a string, got NoneType"),
    ({"question": "q", "answers": "a", "golden_answers": 3}, "flashrag",
     "'golden_answers' must be a string or a non-empty list of strings, got 3"),
    ({"question": "q", "answers": {}}, "dpr", "'answers' must be a string or a non-empty list of strings, got {}"),
    ({"question": "q", "answers": ["a", 1.5, None]}, "dpr", "'answers' must be a string, got NoneType"),
    ({"answer": "a", "question": "q", "context": {}, "supporting_facts": []}, "auto",
     "'context' must be a list of [title, sentences]"),
    ({"answer": "a", "question": "q", "context": [["t"]], "supporting_facts": []}, "auto",
     "context[0] must be [title, sentences]"),
    ({"answer": "a", "question": "q", "context": [[None, "s"]], "supporting_facts": []}, "auto",
     "context[0] title must be a string, got NoneType"),
    ({"answer": "a", "question": "q", "context": [["t", {}]], "supporting_facts": []}, "auto",
     "sentences must be a list of sentences, got dict"),
    ({"answer": "a", "question": "q", "context": [["t", [None]]], "supporting_facts": []}, "auto",
     "sentences must be a string, got NoneType"),
    ({"answer": "a", "question": "q", "context": [], "supporting_facts": [[]]}, "auto",
     "'supporting_facts' must be a list of [title, sentence_id]"),
    ({"answer": "a", "question": "q", "context": [], "supporting_facts": "A"}, "auto",
     "'supporting_facts' must be a list of [title, sentence_id]"),
    ({"answer": "a", "question": "q", "context": [], "supporting_facts": [], "_id": None}, "auto",
     "'_id' must be a string, got NoneType"),
    ({"answer": "a", "context": [], "supporting_facts": []}, "auto", "missing field 'question'"),
    ({"answer": "a", "question": None, "context": [], "supporting_facts": []}, "auto",
     "'question' must be a string, got NoneType"),
    ({"answer": [], "question": "q", "context": [], "supporting_facts": []}, "auto",
     "'answer' must be a string or a non-empty list of strings, got []"),
    ({"question": "q", "x": 1}, "auto", ("cannot tell the QA format from the keys ['question', 'x']; "
     "pass fmt= one of ('hotpotqa', '2wiki', 'musique', 'dpr', 'flashrag')")),
    ({k: 1 for k in "abcdefghi"}, "auto", ("cannot tell the QA format from the keys "
     "['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h']; pass fmt= one of ('hotpotqa', '2wiki', 'musique', 'dpr', 'flashrag')")),
])
def test_malformed_records_name_file_line_and_field(tmp_path, record, fmt, message):
    path = tmp_path / "qa.jsonl"
    path.write_text("\n" + json.dumps(record) + "\n", encoding="utf-8")  # a blank first line: the record is line 2
    with pytest.raises(FormatError) as err:
        load_qa(path, fmt)
    assert str(err.value) == f"{path}:2: {message}"


def test_unknown_keys_and_formats(tmp_path):
    with pytest.raises(FormatError, match=r"qa\.jsonl:1: cannot tell the QA format from the keys \['q', 'x'\]; "
                                          r"pass fmt= one of \('hotpotqa', '2wiki', 'musique', 'dpr', 'flashrag'\)"):
        load(tmp_path, [{"x": 1, "q": 2}])
    with pytest.raises(ValueError, match=r"unknown QA format 'squad'; expected one of \('auto', 'hotpotqa'"):
        load(tmp_path, [MUSIQUE], fmt="squad")


def test_a_json_list_with_leading_space_and_gzip(tmp_path):
    path = tmp_path / "qa.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write(" " * 100 + "\n" + json.dumps([MUSIQUE, MUSIQUE]))
    assert [i.qid for i in load_qa(path)] == ["2hop_1", "2hop_1"]
    assert [i.qid for i in load_qa(path, limit=1)] == ["2hop_1"]
    assert load_qa(path, limit=0) == [] and load_qa(path, limit=-1) == []


@pytest.mark.parametrize(("text", "message"), [
    ("[1, ", "invalid JSON (JSONDecodeError: Expecting value: "),
    ('[{"question": "q", "answers": ["a"]}, 3]', "record 1: expected a JSON object, got int"),
    # the format is told from the first record: the second is read as DPR too
    ('[{"question": "q", "answers": ["a"]}, {"question": "q"}]', "record 1: missing field 'answers'"),
    ('[{"question": "q", "answers": ["a"], "ctxs": 3}]', "record 0: 'ctxs' must be a list"),
    ('[{"question": "q", "answers": ["a"], "ctxs": [{"id": "x", "text": "t"}], "golden_answers": {"a": 1}}]',
     "record 0: 'golden_answers' must be a string or a non-empty list of strings, got {'a': 1}"),
])
def test_a_json_list_names_the_record(tmp_path, text, message):
    path = tmp_path / "qa.json"
    path.write_text(text)
    with pytest.raises(FormatError) as err:
        load_qa(path)
    assert str(err.value).startswith(f"{path}: {message}")


def test_an_empty_file_has_no_items(tmp_path):
    (tmp_path / "empty.json").write_text("   \n")
    assert load_qa(tmp_path / "empty.json") == []
    assert list(iter_qa(tmp_path / "empty.json", "dpr")) == []


def test_a_malformed_value_deep_in_a_record_is_one_line(tmp_path):
    # an id of true is present (not None or empty) but is no string
    path = jsonl(tmp_path, {"question": "q", "answers": ["a"], "ctxs": [{"id": True}]})
    with pytest.raises(FormatError) as err:
        load_qa(path)
    assert str(err.value) == f"{path}:1: ctxs[0].id must be a string, got bool"


def test_a_given_format_is_not_sniffed(tmp_path):
    # keys of both DPR and FlashRAG: fmt="dpr" reads "answers", the sniffer alone would say FlashRAG
    record = {"question": "q", "answers": ["a"], "golden_answers": ["g"], "ctxs": [{"id": "c"}]}
    [item] = load(tmp_path, [record], "dpr")
    assert (item.answers, item.source, item.passages) == (("a",), "dpr", (Passage("c", "", ""),))
    assert [i.source for i in iter_qa(tmp_path / "qa.jsonl")] == ["flashrag"]


def test_context_without_supporting_facts_is_dpr(tmp_path):
    assert load(tmp_path, [{"question": "q", "answers": ["a"], "context": []}])[0].source == "dpr"
