"""BEIR reader and writer edges found by mutation testing: each error's message, missing and null fields, the
duplicate warning, non-ASCII text kept as written, a corpus streamed as pairs."""

import json
import logging

import pytest

from rearank.errors import FormatError, RearankError
from rearank.io.beir import read_corpus, read_qrels, read_queries, write_corpus, write_qrels, write_queries


def lines(path, *rows):
    path.write_text("".join(row + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize(("row", "message"), [
    ('{"_id": "", "text": "t"}', "corpus.jsonl:1: '_id' must be a non-empty string, got ''"),
    ('{"_id": "d1", "text": 5}', "corpus.jsonl:1: 'text' must be a string, got int"),
    ('{"_id": "d1", "title": ["x"], "text": "t"}', "corpus.jsonl:1: 'title' must be a string, got list"),
])
def test_corpus_errors_name_the_field(tmp_path, row, message):
    with pytest.raises(FormatError) as err:
        read_corpus(lines(tmp_path / "corpus.jsonl", row))
    assert str(err.value).endswith(message)


def test_missing_or_null_title_reads_empty(tmp_path):
    path = lines(tmp_path / "corpus.jsonl", '{"_id": "d1", "text": "a"}', '{"_id": 2, "title": null, "text": "b"}')
    assert read_corpus(path) == {"d1": ("", "a"), "2": ("", "b")}


@pytest.mark.parametrize(("row", "message"), [
    ("q1\td1", "qrels.tsv:1: expected 3 tab-separated columns 'query-id\tcorpus-id\tscore', got 2"),
    (" \td1\t1", "qrels.tsv:1: empty query-id or corpus-id"),
    ("q1\t\t1", "qrels.tsv:1: empty query-id or corpus-id"),
    ("q1\td1\thigh", "qrels.tsv:1: score 'high' is not an integer"),
])
def test_qrels_errors_name_the_line(tmp_path, row, message):
    with pytest.raises(FormatError) as err:
        read_qrels(lines(tmp_path / "qrels.tsv", row))
    assert str(err.value).endswith(message)


def test_duplicate_judgments_warn_with_the_file(tmp_path, caplog):
    path = lines(tmp_path / "qrels.tsv", "query-id\tcorpus-id\tscore", "q1\td1\t2", "q1\td1\t0")
    with caplog.at_level(logging.WARNING):
        assert read_qrels(path) == {"q1": {"d1": 2}}
    assert any(str(path) in message and "1 duplicate" in message for message in caplog.messages)


def test_writers_keep_non_ascii_text_as_written(tmp_path):
    write_corpus(tmp_path / "corpus.jsonl", {"d1": ("Café", "naïve — text")})
    write_queries(tmp_path / "queries.jsonl", {"q1": "où est la café?"})
    assert (tmp_path / "corpus.jsonl").read_text(encoding="utf-8") == \
        '{"_id": "d1", "title": "Café", "text": "naïve — text"}\n'
    # BEIR's queries carry a metadata object
    assert (tmp_path / "queries.jsonl").read_text(encoding="utf-8") == \
        '{"_id": "q1", "text": "où est la café?", "metadata": {}}\n'
    assert read_queries(tmp_path / "queries.jsonl") == {"q1": "où est la café?"}


def test_write_corpus_from_a_stream_of_pairs(tmp_path):
    write_corpus(tmp_path / "corpus.jsonl", ((f"d{i}", ("t", f"text {i}")) for i in range(3)))
    assert [json.loads(line)["_id"] for line in (tmp_path / "corpus.jsonl").read_text().splitlines()] == \
        ["d0", "d1", "d2"]


@pytest.mark.parametrize(("qrels", "what"), [({" q1": {"d1": 1}}, "query-id ' q1'"),
                                             ({"q1": {"d\t1": 1}}, "corpus-id 'd\\t1'")])
def test_write_qrels_refusal_names_the_column_and_file(tmp_path, qrels, what):
    path = tmp_path / "qrels.tsv"
    with pytest.raises(RearankError) as err:
        write_qrels(path, qrels)
    assert str(err.value).startswith(f"{path}: cannot write {what}: ")
