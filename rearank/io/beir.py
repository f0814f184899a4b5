"""BEIR layout: ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``, ``text``) and
``qrels/<split>.tsv`` (``query-id TAB corpus-id TAB score`` after a header line)."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Iterator, Mapping

from rearank.errors import FormatError
from rearank.io.files import (
    PathLike,
    atomic_write,
    check_tsv_key,
    collect_by_query,
    iter_data_lines,
    iter_json_lines,
    warn_repeats,
)

QRELS_HEADER = "query-id\tcorpus-id\tscore"


def _id_of(obj: dict, path: PathLike, number: int) -> str:
    value = obj.get("_id")
    if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value) == "":
        raise FormatError(path, number, f"'_id' must be a non-empty string, got {value!r}")
    return str(value)


def _string(obj: dict, key: str, path: PathLike, number: int) -> str:
    value = obj.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise FormatError(path, number, f"{key!r} must be a string, got {type(value).__name__}")
    return value


def _iter_records(path: PathLike, keys: tuple[str, ...]) -> Iterator[tuple[str, tuple[str, ...]]]:
    for number, obj in iter_json_lines(path):
        yield _id_of(obj, path, number), tuple(_string(obj, key, path, number) for key in keys)


def read_corpus(path: PathLike, ids: Collection[str] | None = None) -> dict[str, tuple[str, str]]:
    """Read a BEIR ``corpus.jsonl`` into ``docid -> (title, text)``; ``ids`` keeps only those docids (a repeated
    docid keeps its first record, with one warning counting the repeats)."""
    corpus: dict[str, tuple[str, str]] = {}
    repeats = 0
    for docid, (title, text) in _iter_records(path, ("title", "text")):
        if ids is None or docid in ids:
            repeats += docid in corpus
            corpus.setdefault(docid, (title, text))
    warn_repeats(path, repeats, "docids")
    return corpus


def read_queries(path: PathLike) -> dict[str, str]:
    """Read a BEIR ``queries.jsonl`` into ``qid -> text`` (a repeated qid keeps its first text, with one warning)."""
    queries: dict[str, str] = {}
    repeats = 0
    for qid, (text,) in _iter_records(path, ("text",)):
        repeats += qid in queries
        queries.setdefault(qid, text)
    warn_repeats(path, repeats, "qids")
    return queries


def read_qrels(path: PathLike) -> dict[str, dict[str, int]]:
    """Read a BEIR ``qrels/<split>.tsv`` (header line optional) into ``qid -> {docid: rel}``."""
    return collect_by_query(path, _qrels_rows(path))


def _qrels_rows(path: PathLike) -> Iterator[tuple[str, str, int]]:
    for number, line in iter_data_lines(path):
        fields = line.split("\t")
        if number == 1 and fields[0].strip() == "query-id":
            continue
        if len(fields) != 3:
            raise FormatError(path, number, f"expected 3 tab-separated columns '{QRELS_HEADER}', got {len(fields)}")
        qid, docid, score = (field.strip() for field in fields)
        if not qid or not docid:
            raise FormatError(path, number, "empty query-id or corpus-id")
        try:
            yield qid, docid, int(score)
        except ValueError:
            raise FormatError(path, number, f"score {score!r} is not an integer") from None


def write_corpus(
    path: PathLike, corpus: Mapping[str, tuple[str, str]] | Iterable[tuple[str, tuple[str, str]]]
) -> None:
    """Write ``docid -> (title, text)`` (a mapping or a stream of pairs) as BEIR ``corpus.jsonl``,
    write-then-rename."""
    pairs = corpus.items() if isinstance(corpus, Mapping) else corpus
    with atomic_write(path) as handle:
        for docid, (title, text) in pairs:
            handle.write(json.dumps({"_id": str(docid), "title": title, "text": text}, ensure_ascii=False) + "\n")


def write_queries(path: PathLike, queries: Mapping[str, str]) -> None:
    """Write ``qid -> text`` as BEIR ``queries.jsonl``, write-then-rename."""
    with atomic_write(path) as handle:
        for qid, text in queries.items():
            handle.write(json.dumps({"_id": str(qid), "text": text, "metadata": {}}, ensure_ascii=False) + "\n")


def write_qrels(path: PathLike, qrels: Mapping[str, Mapping[str, int]]) -> None:
    """Write qrels as a BEIR ``qrels/<split>.tsv`` with its header line, write-then-rename."""
    with atomic_write(path) as handle:
        handle.write(QRELS_HEADER + "\n")
        for qid, judged in qrels.items():
            qid = check_tsv_key(qid, "query-id", path)
            for docid, rel in judged.items():
                handle.write(f"{qid}\t{check_tsv_key(docid, 'corpus-id', path)}\t{int(rel)}\n")
