import json

from hypothesis import given
from hypothesis import strategies as st

from rearank.methods.groupwise.parser import STATUSES, answer_span, format_scores, label_scores, parse_scores


def wrap(answer: str, reason: str = "doc 1 answers it") -> str:
    return f"<reason>{reason}</reason>\n<answer>{answer}</answer>"


def test_ok_answer():
    p = parse_scores(wrap('{"[1]": 8, "[2]": 0, "[3]": 5}'), 3)
    assert p.scores == (8.0, 0.0, 5.0)
    assert (p.status, p.has_tags, p.json_ok, p.n_scored, p.n_missing, p.n_out_of_range) == ("ok", True, True, 3, 0, 0)


def test_key_spellings():
    p = parse_scores(wrap('{"[1]": 1, "2": 2, "[ 3 ]": 3, " 4 ": 4}'), 4)
    assert p.scores == (1.0, 2.0, 3.0, 4.0) and p.status == "ok"


def test_id_spelled_twice_keeps_first():
    assert parse_scores(wrap('{"[1]": 7, "1": 2, "[2]": 3}'), 2).scores == (7.0, 3.0)


def test_floats_kept_numeric_strings_accepted():
    p = parse_scores(wrap('{"[1]": 7.5, "[2]": "6", "[3]": 0.25}'), 3)
    assert p.scores == (7.5, 6.0, 0.25) and p.status == "ok"


def test_out_of_range_scores_clipped_and_bad_values_dropped():
    p = parse_scores(wrap('{"[1]": 12, "[2]": -3, "[3]": "high", "[4]": true, "[5]": null, "[6]": 4}'), 6)
    assert p.scores == (10.0, 0.0, None, None, None, 4.0)
    assert p.status == "out_of_range" and p.n_out_of_range == 5 and p.n_missing == 3


def test_out_of_range_ids_and_missing_ids():
    p = parse_scores(wrap('{"[1]": 3, "[9]": 5, "doc": 2}'), 3)
    assert p.scores == (3.0, None, None) and p.n_out_of_range == 2 and p.status == "out_of_range"
    p = parse_scores(wrap('{"[2]": 3}'), 3)
    assert p.scores == (None, 3.0, None) and p.status == "missing_ids" and p.n_missing == 2
    assert p.filled() == [0.0, 3.0, 0.0] and p.filled(-1.0) == [-1.0, 3.0, -1.0]


def test_bad_json_and_non_object():
    for answer in ('{"[1]": 3, "[2]": 4,}', "[1] > [2]", "[3, 4]", "{'[1]': 3}", ""):
        p = parse_scores(wrap(answer), 2)
        assert p.status == "bad_json" and not p.json_ok and p.has_tags and p.scores == (None, None), answer


def test_bad_tags_still_reads_scores():
    p = parse_scores('{"[1]": 4, "[2]": 9}', 2)
    assert p.status == "bad_tags" and not p.has_tags and p.json_ok and p.scores == (4.0, 9.0)
    p = parse_scores('<think>x</think><answer>{"[1]": 4}</answer>', 1)
    assert p.status == "bad_tags" and p.scores == (4.0,)
    # the answer before the reason is not the expected order
    assert not parse_scores('<answer>{"[1]": 4}</answer><reason>x</reason>', 1).has_tags


def test_answer_span_fallbacks():
    assert answer_span('<reason>r</reason><answer>{"a": 1}</answer> tail') == '{"a": 1}'
    assert answer_span("<reason>r</reason><answer>A</answer> more <answer>B</answer>") == "B"
    assert answer_span("<answer>A</answer> <answer>unclosed") == "A"
    assert answer_span("<reason>r</reason><answer>unclosed {") == "unclosed {"
    assert answer_span("<reason>{1}</reason> after") == " after"
    assert answer_span("plain") == "plain"


def test_reasoning_json_does_not_leak_and_fences_are_fine():
    text = '<reason>draft {"[1]": 0}</reason>\n<answer>```json\n{"[1]": 9}\n```</answer>'
    p = parse_scores(text, 1)
    assert p.scores == (9.0,) and p.status == "ok"


def test_case_insensitive_tags_and_truncation():
    assert parse_scores('<REASON>x</Reason><ANSWER>{"[1]": 2}</answer>', 1).status == "ok"
    p = parse_scores('<reason>x</reason><answer>{"[1]": 2, "[2]":', 2)
    assert p.status == "bad_tags" and not p.json_ok and p.scores == (None, None)


def test_non_string_and_bad_n():
    assert parse_scores(None, 2).status == "bad_tags"
    assert parse_scores(wrap('{"[1]": 2}'), "x").scores == ()
    assert parse_scores(wrap("{}"), 0).status == "ok"


def test_format_roundtrip_and_label_scores():
    assert format_scores([8, 0, 7.5]) == '{"[1]": 8, "[2]": 0, "[3]": 7.5}'
    assert label_scores([0, 1, 2, 3]) == [0, 3, 7, 10]
    assert label_scores([0, 1], max_label=3) == [0, 3]
    assert label_scores([-1, 0]) == [0, 0]


@given(st.text(), st.integers(0, 40))
def test_never_raises(text, n):
    p = parse_scores(text, n)
    assert p.status in STATUSES and len(p.scores) == n
    assert all(s is None or 0.0 <= s <= 10.0 for s in p.scores)
    assert p.n_scored + p.n_missing == n


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)


@given(st.dictionaries(st.text(max_size=6) | st.integers(-3, 30).map(lambda i: f"[{i}]"), json_values, max_size=25),
       st.integers(0, 25))
def test_arbitrary_json_objects_never_raise(obj, n):
    p = parse_scores(wrap(json.dumps(obj)), n)
    assert p.json_ok and p.status in STATUSES
    assert all(s is None or 0.0 <= s <= 10.0 for s in p.scores)


@given(st.lists(st.integers(0, 10) | st.floats(0, 10), max_size=30))
def test_roundtrip(scores):
    p = parse_scores(wrap(format_scores(scores)), len(scores))
    assert p.status == "ok" and list(p.scores) == [float(s) for s in scores]


@given(st.lists(st.integers(-2, 10), min_size=1, max_size=30))
def test_label_scores_keep_label_order(labels):
    scores = label_scores(labels, max_label=10)
    assert all(0 <= s <= 10 for s in scores)
    for i in range(len(labels)):
        for j in range(len(labels)):
            if max(labels[i], 0) < max(labels[j], 0):
                assert scores[i] < scores[j]
