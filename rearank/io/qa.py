"""QA files -> :class:`rearank.types.QAItem`: HotpotQA, 2WikiMultihopQA, MuSiQue, DPR ``ctxs``, FlashRAG.

Each file is a JSON list or JSON lines (sniffed from its first character), ``.gz`` transparent. Passage ids:
HotpotQA / 2Wiki use the paragraph's 0-based position in ``context``; MuSiQue its ``idx``; DPR and FlashRAG the
ctx ``id`` when present, else its 0-based position. A malformed record raises :class:`FormatError` naming the
file and line (JSON lines) or the record's index (JSON list).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

from rearank.errors import FormatError
from rearank.io.files import PathLike, iter_json_lines, open_input, read_text
from rearank.types import Passage, QAItem

FORMATS = ("hotpotqa", "2wiki", "musique", "dpr", "flashrag")


class _Bad(ValueError):
    """A record-level problem; the loader adds the file and line."""


def _str(value: object, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise _Bad(f"{what} must be a string, got {type(value).__name__}")
    return str(value)


def _field(record: dict, key: str) -> object:
    if key not in record:
        raise _Bad(f"missing field {key!r}")
    return record[key]


def _answers(value: object, what: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise _Bad(f"{what} must be a string or a non-empty list of strings, got {value!r}")
    return tuple(_str(a, what) for a in items)


def _join_sentences(sentences: object, what: str) -> str:
    if isinstance(sentences, str):
        return sentences
    if not isinstance(sentences, list):
        raise _Bad(f"{what} must be a list of sentences, got {type(sentences).__name__}")
    parts = [_str(s, what) for s in sentences]
    # HotpotQA sentences carry their leading space; 2Wiki's do not
    return "".join(p if i == 0 or p[:1].isspace() else " " + p for i, p in enumerate(parts)).strip()


def _context_item(record: dict, source: str, index: int) -> QAItem:
    """HotpotQA / 2Wiki: ``context [[title, [sentences]]]``, ``supporting_facts [[title, sent_id]]``."""
    context = _field(record, "context")
    if not isinstance(context, list):
        raise _Bad("'context' must be a list of [title, sentences]")
    passages = []
    for i, entry in enumerate(context):
        if not isinstance(entry, list) or len(entry) != 2:
            raise _Bad(f"context[{i}] must be [title, sentences]")
        passages.append(Passage(str(i), _str(entry[0], f"context[{i}] title"), _join_sentences(entry[1], "sentences")))
    facts = record.get("supporting_facts") or []
    if not isinstance(facts, list) or not all(isinstance(f, list) and f for f in facts):
        raise _Bad("'supporting_facts' must be a list of [title, sentence_id]")
    titles = {str(f[0]) for f in facts}
    qid = _str(record.get("_id", record.get("id", index)), "'_id'")
    return QAItem(
        qid=qid,
        question=_str(_field(record, "question"), "'question'"),
        answers=_answers(_field(record, "answer"), "'answer'"),
        passages=tuple(passages),
        supporting=frozenset(p.pid for p in passages if p.title in titles),
        source=source,
    )


def _hotpotqa(record: dict, index: int) -> QAItem:
    return _context_item(record, "hotpotqa", index)


def _2wiki(record: dict, index: int) -> QAItem:
    return _context_item(record, "2wiki", index)


def _musique(record: dict, index: int) -> QAItem:
    paragraphs = _field(record, "paragraphs")
    if not isinstance(paragraphs, list):
        raise _Bad("'paragraphs' must be a list")
    passages, supporting = [], set()
    for i, p in enumerate(paragraphs):
        if not isinstance(p, dict):
            raise _Bad(f"paragraphs[{i}] must be an object")
        pid = _str(p.get("idx", i), f"paragraphs[{i}].idx")
        text = _str(p.get("paragraph_text", p.get("text", "")), f"paragraphs[{i}].paragraph_text")
        passages.append(Passage(pid, _str(p.get("title", ""), f"paragraphs[{i}].title"), text))
        if p.get("is_supporting") is True:
            supporting.add(pid)
    aliases = record.get("answer_aliases") or []
    if not isinstance(aliases, list):
        raise _Bad("'answer_aliases' must be a list")
    answers = _answers(_field(record, "answer"), "'answer'") + tuple(_str(a, "'answer_aliases'") for a in aliases)
    return QAItem(
        qid=_str(record.get("id", index), "'id'"),
        question=_str(_field(record, "question"), "'question'"),
        answers=tuple(dict.fromkeys(answers)),
        passages=tuple(passages),
        supporting=frozenset(supporting),
        source="musique",
    )


def _ctxs_item(record: dict, index: int, answers_key: str, source: str) -> QAItem:
    ctxs = record.get("ctxs") or []
    if not isinstance(ctxs, list):
        raise _Bad("'ctxs' must be a list")
    passages, gold = [], set()
    for i, c in enumerate(ctxs):
        if not isinstance(c, dict):
            raise _Bad(f"ctxs[{i}] must be an object")
        pid = _str(c["id"], f"ctxs[{i}].id") if c.get("id") not in (None, "") else str(i)
        has = c.get("hasanswer", c.get("has_answer"))
        text = c.get("text", c.get("contents", ""))
        passages.append(
            Passage(
                pid,
                _str(c.get("title") or "", f"ctxs[{i}].title"),
                _str(text, f"ctxs[{i}].text"),
                None if has is None else bool(has),
            )
        )
        if c.get("isgold") is True:
            gold.add(pid)
    return QAItem(
        qid=_str(record.get("id", index), "'id'"),
        question=_str(_field(record, "question"), "'question'"),
        answers=_answers(_field(record, answers_key), repr(answers_key)),
        passages=tuple(passages),
        supporting=frozenset(gold),
        source=source,
    )


def _dpr(record: dict, index: int) -> QAItem:
    return _ctxs_item(record, index, "answers", "dpr")


def _flashrag(record: dict, index: int) -> QAItem:
    return _ctxs_item(record, index, "golden_answers", "flashrag")


PARSERS: dict[str, Callable[[dict, int], QAItem]] = {
    "hotpotqa": _hotpotqa,
    "2wiki": _2wiki,
    "musique": _musique,
    "dpr": _dpr,
    "flashrag": _flashrag,
}


def sniff_format(record: dict) -> str:
    """The format a record's keys say it is in (raises ``ValueError`` when none fits)."""
    if "paragraphs" in record:
        return "musique"
    if "context" in record and "supporting_facts" in record:
        return "2wiki" if ("evidences" in record or "entity_ids" in record) else "hotpotqa"
    if "golden_answers" in record:
        return "flashrag"
    if "answers" in record and "question" in record:
        return "dpr"
    raise _Bad(f"cannot tell the QA format from the keys {sorted(record)[:8]}; pass fmt= one of {FORMATS}")


def _is_json_list(path: PathLike) -> bool:
    with open_input(path) as handle:
        while True:
            chunk = handle.read(64)
            if not chunk:
                return False
            stripped = chunk.lstrip()
            if stripped:
                return stripped[:1] == b"["


def _records(path: PathLike) -> Iterator[tuple[int | None, int, dict]]:
    """Yield ``(line, index, record)``: a JSON list gives line None, JSON lines their 1-based line number."""
    if _is_json_list(path):
        try:
            data = json.loads(read_text(path))
        except (ValueError, RecursionError) as err:
            raise FormatError(path, None, f"invalid JSON ({type(err).__name__}: {err})") from None
        for index, record in enumerate(data):
            if not isinstance(record, dict):
                raise FormatError(path, None, f"record {index}: expected a JSON object, got {type(record).__name__}")
            yield None, index, record
    else:
        for index, (number, record) in enumerate(iter_json_lines(path)):
            yield number, index, record


def iter_qa(path: PathLike, fmt: str = "auto") -> Iterator[QAItem]:
    """Stream the QA items of ``path`` (see :func:`load_qa`)."""
    if fmt != "auto" and fmt not in PARSERS:
        raise ValueError(f"unknown QA format {fmt!r}; expected one of {('auto', *FORMATS)}")
    parser = PARSERS.get(fmt)
    for line, index, record in _records(path):
        try:
            if parser is None:
                parser = PARSERS[sniff_format(record)]
            yield parser(record, index)
        except (_Bad, KeyError, TypeError, ValueError) as err:
            message = str(err) if isinstance(err, _Bad) else f"malformed record ({type(err).__name__}: {err})"
            if line is None:
                raise FormatError(path, None, f"record {index}: {message}") from None
            raise FormatError(path, line, message) from None


def load_qa(path: PathLike, fmt: str = "auto", limit: int | None = None) -> list[QAItem]:
    """Load QA items from a HotpotQA / 2Wiki / MuSiQue / DPR / FlashRAG file (``fmt="auto"`` sniffs the keys)."""
    items: list[QAItem] = []
    if limit is not None and limit <= 0:
        return items
    for item in iter_qa(path, fmt):
        items.append(item)
        if limit is not None and len(items) >= limit:
            break
    return items
