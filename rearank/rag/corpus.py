"""A retrieval corpus pooled from QA files (``rearank rag corpus``), and the passage key that matches a QA
paragraph to a corpus passage.

Every paragraph of every given QA file goes into one BEIR ``corpus.jsonl``, once: two paragraphs are the same when
their :func:`passage_key` (title and text, Unicode NFC, whitespace collapsed, case folded) is the same. A passage's
id is a digest of its key (``p`` + 16 hex digits), so the same paragraph gets the same id whatever files are pooled
and in whatever order.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterable, Sequence

from rearank.errors import RearankError
from rearank.io.beir import write_corpus, write_queries
from rearank.io.files import PathLike
from rearank.types import Passage, QAItem


def norm_text(text: str) -> str:
    """Unicode NFC, whitespace collapsed, case folded."""
    return " ".join(unicodedata.normalize("NFC", text).split()).casefold()


def passage_key(title: str, text: str) -> str:
    """What makes two paragraphs the same passage: normalised title and text."""
    return f"{norm_text(title)}\x1f{norm_text(text)}"


def passage_id(title: str, text: str) -> str:
    """The stable corpus id of a paragraph: ``p`` + the first 16 hex digits of the SHA-256 of its key."""
    return "p" + hashlib.sha256(passage_key(title, text).encode("utf-8")).hexdigest()[:16]


def pool_passages(items: Iterable[QAItem]) -> dict[str, tuple[str, str]]:
    """``id -> (title, text)`` of every distinct non-empty paragraph of ``items``, in first-seen order."""
    pooled: dict[str, tuple[str, str]] = {}
    for item in items:
        for p in item.passages:
            if p.text.strip():
                pooled.setdefault(passage_id(p.title, p.text), (p.title, p.text))
    return pooled


def write_pooled_corpus(inputs: Sequence[PathLike], output: PathLike, fmt: str = "auto",
                        queries: PathLike | None = None) -> dict[str, int]:
    """Pool the paragraphs of the QA files ``inputs`` into a BEIR ``corpus.jsonl`` at ``output`` (write-then-rename);
    with ``queries``, also their questions as BEIR ``queries.jsonl``. Returns counts."""
    from rearank.io.outputs import check_outputs
    from rearank.io.qa import iter_qa

    check_outputs({"--qa": list(inputs)}, {"--output": output, "--queries": queries})
    paragraphs = 0
    questions: dict[str, str] = {}
    pooled: dict[str, tuple[str, str]] = {}
    for path in inputs:
        for item in iter_qa(path, fmt):
            question = " ".join(item.question.split())
            if questions.setdefault(item.qid, question) != question:
                raise RearankError(f"{path}: question id {item.qid!r} names two different questions across the "
                                   "inputs; queries need unique ids")
            paragraphs += len(item.passages)
            pooled.update((k, v) for k, v in pool_passages([item]).items() if k not in pooled)
    if not pooled:
        raise RearankError("the QA files hold no paragraph to pool")
    write_corpus(output, pooled)
    if queries:
        write_queries(queries, questions)
    return {"files": len(inputs), "questions": len(questions), "paragraphs": paragraphs, "passages": len(pooled)}


def with_passages(item: QAItem, passages: Sequence[Passage], supporting: Iterable[str]) -> QAItem:
    """``item`` with other candidate passages and supporting ids (question, answers, source kept)."""
    return QAItem(item.qid, item.question, item.answers, tuple(passages), frozenset(supporting), item.source)
