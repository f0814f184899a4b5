"""Relevance judgments looked up by text, so that the oracle backend can be served.

HTTP clients send texts, not ids: the judge maps the query text to its qid (topics) and each document text to
its docid (docs), and lends the oracle the grades of one request under that request's own qid.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from rearank.data import packs

#: The entry of :attr:`TextJudge.live` that holds the pack's top grade (no request has this qid).
SCALE_QID = ""


class TextJudge:
    """Grades by (query text, document text); :attr:`live` is the qrels mapping the oracle backend reads.

    ``live`` starts with the pack's top grade under :data:`SCALE_QID`, because the groupwise oracle fixes its score
    scale from the highest grade in its qrels when it is built, before any request arrives.
    """

    def __init__(self, topics: Mapping[str, str], docs: Mapping[str, tuple[str, str]],
                 qrels: Mapping[str, Mapping[str, int]]) -> None:
        self.qid_of = {text: qid for qid, text in topics.items()}
        self.docid_of = {text: docid for docid, (_title, text) in docs.items()}
        self.qrels = qrels
        top = max((grade for judged in qrels.values() for grade in judged.values()), default=1)
        self.live: dict[str, dict[str, int]] = {SCALE_QID: {SCALE_QID: top}}

    @classmethod
    def from_files(cls, topics: str | Path, docs: str | Path, qrels: str | Path) -> TextJudge:
        """From a topics file, a docs file and a qrels file (the formats ``rearank rerank`` reads)."""
        return cls(packs.load_topics(topics), packs.load_docs(docs), packs.load_qrels(qrels))

    def register(self, qid: str, query: str, texts: Sequence[str]) -> None:
        """Judge one request: document ``i`` (docid ``str(i)``) gets the grade of its text for the query."""
        judged = self.qrels.get(self.qid_of.get(query, ""), {})
        self.live[qid] = {str(i): judged.get(self.docid_of.get(text, ""), 0) for i, text in enumerate(texts)}

    def release(self, qid: str) -> None:
        """Forget a finished request."""
        self.live.pop(qid, None)
