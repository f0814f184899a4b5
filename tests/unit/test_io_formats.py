"""Every reader: write->read round trips, and bad lines -> FormatError naming the right line (never another error)."""

from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rearank.errors import FormatError, RearankError
from rearank.io import beir, requests_jsonl, topics, trec
from rearank.io.docs import read_docs, write_docs
from rearank.io.files import one_line
from rearank.types import Candidate, Query, Request

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# identifiers the formats carry (rearank.io.files.id_problem): non-empty, no character str.split() splits on,
# not starting with a byte-order mark (readers drop one at the start of a file); no surrogates (not UTF-8)
WHITESPACE = "".join(chr(c) for c in range(0x110000) if chr(c).isspace())
ids = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters=WHITESPACE), min_size=1,
              max_size=12).filter(lambda text: not text.startswith("\ufeff"))
texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
scores = st.floats(allow_nan=False, allow_infinity=False, width=64)
suffixes = st.sampled_from(["", ".gz"])

READERS: dict[str, Callable] = {
    "run": trec.read_run,
    "qrels": trec.read_qrels,
    "topics": topics.read_topics,
    "docs": read_docs,
    "corpus": beir.read_corpus,
    "queries": beir.read_queries,
    "beir_qrels": beir.read_qrels,
    "requests": requests_jsonl.read_requests,
}

GOOD_LINE = {
    "run": "q1 Q0 d1 1 2.5 tag",
    "qrels": "q1 0 d1 1",
    "topics": "q1\twhat is a flea",
    "docs": "d1\tA flea is an insect.",
    "corpus": '{"_id": "d1", "title": "Fleas", "text": "A flea is an insect."}',
    "queries": '{"_id": "q1", "text": "what is a flea"}',
    "beir_qrels": "q1\td1\t1",
    "requests": '{"query": {"text": "flea", "qid": "q1"}, "candidates": [{"docid": "d1", "score": 1.0, "doc": {"contents": "x"}}]}',
}

BAD_LINES = {
    "run": ["q1 Q0 d1 1 2.5", "q1 Q0 d1 one 2.5 t", "q1 Q0 d1 1 high t", "q1 Q0 d1 1 nan t", "q1 Q0 d1 1 1e999 t",
            "q1 Q0 d1 1 2.5 t extra"],
    "qrels": ["q1 0 d1", "q1 0 d1 yes", "q1 0 d1 1 extra", "q1 0 d1 1.5"],
    "topics": ["q1 no tab here", "\tempty qid"],
    "docs": ["d1 no tab", " \ttext"],
    "corpus": ["{not json", "[1, 2]", '{"title": "no id"}', '{"_id": "", "text": "x"}', '{"_id": "d", "text": 3}',
               '{"_id": true, "text": "x"}', '"just a string"'],
    "queries": ['{"_id": null, "text": "x"}', "{", '{"_id": "q", "text": ["a"]}'],
    "beir_qrels": ["q1\td1", "q1\td1\tyes", "q1\td1\t1\t2", "q1 d1 1", "\td1\t1"],
    "requests": ['{"candidates": []}', '{"query": {"qid": "q"}, "candidates": []}',
                 '{"query": {"text": "t", "qid": "q"}}',
                 '{"query": {"text": "t", "qid": "q"}, "candidates": [{"docid": "d", "score": "high"}]}',
                 '{"query": {"text": "t", "qid": "q"}, "candidates": [{"score": 1}]}',
                 '{"query": {"text": "t", "qid": "q"}, "candidates": [{"docid": "d", "score": 1, "doc": {"url": "u"}}]}',
                 '{"query": {"text": "t", "qid": "q"}, "candidates": ["d1"]}',
                 '{"query": {"text": "t", "qid": ""}, "candidates": []}'],
}


def _write(directory: str, name: str, content: bytes) -> Path:
    path = Path(directory) / name
    path.write_bytes(content)
    return path


# ---------------------------------------------------------------- round trips


@FAST
@given(
    run=st.dictionaries(ids, st.dictionaries(ids, scores, min_size=1, max_size=8), max_size=6),
    suffix=suffixes,
    tag=ids,
)
@example(run={"q\ufeff": {"\u200b": 1.0}}, suffix="", tag="t")  # a BOM inside an id and a zero-width space stay
def test_run_round_trip(run: dict, suffix: str, tag: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / f"run.trec{suffix}"
        trec.write_run(path, {q: list(r.items()) for q, r in run.items()}, tag=tag)
        back = trec.read_run(path)
    assert back == {q: trec.trec_order(r.items()) for q, r in run.items()}
    assert list(back) == list(run)  # queries keep file order


BAD_IDS = ["", "\ufeff", "\ufeffq1", "q 1", "q\t1", "q\n1", "q\u00a01", "q\u20281", "q\x1c1"]
ID_WRITERS = {
    "run qid": lambda path, bad: trec.write_run(path, {bad: [("d1", 1.0)]}),
    "run docid": lambda path, bad: trec.write_run(path, {"q1": [("d1", 2.0), (bad, 1.0)]}),
    "run tag": lambda path, bad: trec.write_run(path, {"q1": [("d1", 1.0)]}, tag=bad),
    "qrels qid": lambda path, bad: trec.write_qrels(path, {bad: {"d1": 1}}),
    "qrels docid": lambda path, bad: trec.write_qrels(path, {"q1": {bad: 1}}),
    "requests qid": lambda path, bad: requests_jsonl.write_requests(path, [Request(Query(bad, "t"), ())]),
    "requests docid": lambda path, bad: requests_jsonl.write_requests(
        path, [Request(Query("q1", "t"), (Candidate("d1", 2.0, "x"), Candidate(bad, 1.0, "y")))]),
}
# a tab-separated key may hold inner spaces, not surrounding ones, a tab or a line break
BAD_TSV_KEYS = ["", "\ufeff", "\ufeffq1", " q1", "q1 ", "q\t1", "q\n1"]
TSV_WRITERS = {
    "beir qrels": lambda path, bad: beir.write_qrels(path, {bad: {"d1": 1}}),
    "topics": lambda path, bad: topics.write_topics(path, {bad: "text"}),
    "docs": lambda path, bad: write_docs(path, {bad: ("", "text")}),
}


def _refused(tmp_path: Path, write: Callable, bad: str) -> None:
    """``write`` refuses ``bad`` in one line naming it and the file, and writes nothing."""
    path = tmp_path / "out.txt"
    with pytest.raises(RearankError) as err:
        write(path, bad)
    message = str(err.value)
    assert message.startswith(f"{path}: cannot write ") and repr(bad) in message and "\n" not in message
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("writer", ID_WRITERS)
@pytest.mark.parametrize("bad", BAD_IDS)
def test_writers_refuse_ids_the_format_cannot_carry(tmp_path: Path, writer: str, bad: str) -> None:
    """An id a reader would split, drop or read as another (empty, whitespace, a leading BOM) is refused."""
    _refused(tmp_path, ID_WRITERS[writer], bad)


@pytest.mark.parametrize("writer", TSV_WRITERS)
@pytest.mark.parametrize("bad", BAD_TSV_KEYS)
def test_tsv_writers_refuse_keys_the_format_cannot_carry(tmp_path: Path, writer: str, bad: str) -> None:
    _refused(tmp_path, TSV_WRITERS[writer], bad)


def test_run_is_sorted_as_trec_eval_ranks() -> None:
    ranked = [("b", 1.0), ("c", 1.0), ("a", 2.0), ("d", 0.5)]
    assert trec.trec_order(ranked) == [("a", 2.0), ("c", 1.0), ("b", 1.0), ("d", 0.5)]


@FAST
@given(qrels=st.dictionaries(ids, st.dictionaries(ids, st.integers(-3, 5), min_size=1, max_size=8), max_size=6),
       suffix=suffixes)
def test_qrels_round_trip(qrels: dict, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        trec.write_qrels(Path(d) / f"q{suffix}", qrels)
        beir.write_qrels(Path(d) / f"q.tsv{suffix}", qrels)
        assert trec.read_qrels(Path(d) / f"q{suffix}") == qrels
        assert beir.read_qrels(Path(d) / f"q.tsv{suffix}") == qrels


@FAST
@given(items=st.dictionaries(ids, texts, max_size=8), suffix=suffixes)
def test_topics_and_docs_round_trip(items: dict, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        topics.write_topics(Path(d) / f"t.tsv{suffix}", items)
        write_docs(Path(d) / f"d.tsv{suffix}", {k: ("", v) for k, v in items.items()})
        assert topics.read_topics(Path(d) / f"t.tsv{suffix}") == {k: one_line(v).strip() for k, v in items.items()}
        assert read_docs(Path(d) / f"d.tsv{suffix}") == {k: ("", one_line(v).strip()) for k, v in items.items()}


def test_docs_tsv_title_is_joined_and_ids_filter(tmp_path: Path) -> None:
    write_docs(tmp_path / "d.tsv", {"1": ("Fleas", "live a year"), "2": ("", "two\tlines\nhere")})
    assert read_docs(tmp_path / "d.tsv") == {"1": ("", "Fleas live a year"), "2": ("", "two lines here")}
    assert read_docs(tmp_path / "d.tsv", ids={"2", "3"}) == {"2": ("", "two lines here")}


@FAST
@given(corpus=st.dictionaries(ids, st.tuples(texts, texts), max_size=8),
       queries=st.dictionaries(ids, texts, max_size=8), suffix=suffixes)
def test_beir_round_trip(corpus: dict, queries: dict, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        beir.write_corpus(Path(d) / f"corpus.jsonl{suffix}", corpus)
        beir.write_queries(Path(d) / f"queries.jsonl{suffix}", queries)
        assert beir.read_corpus(Path(d) / f"corpus.jsonl{suffix}") == corpus
        assert beir.read_queries(Path(d) / f"queries.jsonl{suffix}") == queries
        some = set(list(corpus)[:2])
        assert beir.read_corpus(Path(d) / f"corpus.jsonl{suffix}", ids=some) == {k: corpus[k] for k in some}


candidates = st.builds(Candidate, docid=ids, score=scores, text=texts, title=texts)
requests_st = st.lists(
    st.builds(Request, query=st.builds(Query, qid=ids, text=texts),
             candidates=st.lists(candidates, max_size=5, unique_by=lambda c: c.docid)),
    max_size=5,
)


@FAST
@given(requests=requests_st, suffix=suffixes)
def test_requests_round_trip(requests: list, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        requests_jsonl.write_requests(Path(d) / f"r.jsonl{suffix}", requests)
        assert requests_jsonl.read_requests(Path(d) / f"r.jsonl{suffix}") == requests


def test_requests_read_anserini_and_rankllm_doc_shapes(tmp_path: Path) -> None:
    lines = [
        {"query": {"text": "flea", "qid": 264014}, "candidates": [
            {"doc": {"contents": "passage one"}, "docid": "7", "score": 15.2},
            {"doc": {"title": "T", "text": "body"}, "docid": 8, "score": 14},
            {"doc": {"segment": "seg", "title": "V2", "headings": "h", "url": "u"}, "docid": "m_1", "score": 13.0},
            {"doc": "plain string", "docid": "9", "score": 12.0},
            {"doc": {"title": "only a title"}, "docid": "10", "score": 11.0},
        ]},
    ]
    path = tmp_path / "requests.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    (request,) = requests_jsonl.read_requests(path)
    assert request.query == Query("264014", "flea")
    assert [(c.docid, c.score, c.title, c.text) for c in request.candidates] == [
        ("7", 15.2, "", "passage one"), ("8", 14.0, "T", "body"), ("m_1", 13.0, "V2", "seg"),
        ("9", 12.0, "", "plain string"), ("10", 11.0, "only a title", ""),
    ]
    requests_jsonl.write_requests(tmp_path / "out.jsonl", [request])
    written = json.loads((tmp_path / "out.jsonl").read_text())
    assert written["candidates"][0]["doc"] == {"contents": "passage one"}
    assert written["candidates"][1]["doc"] == {"title": "T", "text": "body"}


# ---------------------------------------------------------------- duplicates and headers


def test_run_duplicates_keep_first_and_warn_with_count(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "run.trec"
    path.write_text("q Q0 a 1 3 t\nq Q0 b 2 2 t\nq Q0 a 3 9 t\nq Q0 b 4 1 t\nr Q0 a 1 1 t\n")
    with caplog.at_level(logging.WARNING, logger="rearank.io"):
        run = trec.read_run(path)
    assert run == {"q": [("a", 3.0), ("b", 2.0)], "r": [("a", 1.0)]}
    assert "2 duplicate" in caplog.text


def test_beir_qrels_header_is_optional(tmp_path: Path) -> None:
    (tmp_path / "a.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    (tmp_path / "b.tsv").write_text("q1\td1\t1\n")
    assert beir.read_qrels(tmp_path / "a.tsv") == beir.read_qrels(tmp_path / "b.tsv") == {"q1": {"d1": 1}}


def test_blank_lines_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "t.tsv").write_text("\nq1\tone\n   \nq2\ttwo\n\n")
    assert topics.read_topics(tmp_path / "t.tsv") == {"q1": "one", "q2": "two"}


# ---------------------------------------------------------------- malformed input


@pytest.mark.parametrize("kind,bad", [(kind, bad) for kind, lines in BAD_LINES.items() for bad in lines])
def test_bad_line_is_named(tmp_path: Path, kind: str, bad: str) -> None:
    header = ["query-id\tcorpus-id\tscore"] if kind == "beir_qrels" else []
    lines = [*header, GOOD_LINE[kind], "", GOOD_LINE[kind].replace("1", "2"), bad, GOOD_LINE[kind]]
    path = tmp_path / "input"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(FormatError) as info:
        READERS[kind](path)
    assert info.value.line == len(lines) - 1
    assert str(info.value).startswith(f"{path}:{len(lines) - 1}: ")


@FAST
@given(kind=st.sampled_from(sorted(READERS)), before=st.integers(0, 3), garbage=st.text(max_size=60))
def test_arbitrary_line_is_read_or_named(kind: str, before: int, garbage: str) -> None:
    garbage = garbage.replace("\n", " ")
    with tempfile.TemporaryDirectory() as d:
        path = _write(d, "input", ("\n".join([GOOD_LINE[kind]] * before + [garbage]) + "\n").encode("utf-8", "replace"))
        try:
            READERS[kind](path)
        except FormatError as err:
            assert err.line == before + 1
            assert str(err).startswith(f"{path}:{before + 1}: ")


@FAST
@given(kind=st.sampled_from(sorted(READERS)), content=st.binary(max_size=200), gz=st.booleans())
def test_arbitrary_bytes_never_raise_another_error(kind: str, content: bytes, gz: bool) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = _write(d, "input.gz" if gz else "input", content)
        try:
            READERS[kind](path)
        except FormatError as err:
            assert err.path == str(path)
