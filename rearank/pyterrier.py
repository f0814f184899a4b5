"""PyTerrier integration: ``bm25 >> RearankTransformer(...)`` (needs the ``pyterrier`` extra).

:class:`RearankTransformer` takes PyTerrier's result frame (``qid, query, docno, text, score, rank``; ``title``
optional) and returns it reordered per query with new ``score`` and ``rank``, listwise or groupwise, reranking
all the frame's queries in one batched call of :meth:`rearank.Reranker.rerank_many`. Nothing here needs Java or
Terrier: any first stage that yields the frame works, e.g. a run file as a transformer
(``pt.Transformer.from_df(run_frame(requests))``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import pyterrier as pt

from rearank.api import Reranker, rank_scores
from rearank.errors import RearankError
from rearank.types import Candidate, Query, Request

REQUIRED = ("qid", "query", "docno")


def run_frame(requests: Sequence[Request]) -> pd.DataFrame:
    """A PyTerrier result frame of first-stage requests (``qid, query, docno, title, text, score, rank``)."""
    rows = [(r.query.qid, r.query.text, c.docid, c.title, c.text, c.score, rank)
            for r in requests for rank, c in enumerate(r.candidates)]
    return pd.DataFrame(rows, columns=["qid", "query", "docno", "title", "text", "score", "rank"])


def topics_frame(requests: Sequence[Request]) -> pd.DataFrame:
    """PyTerrier topics (``qid, query``) of requests."""
    return pd.DataFrame([(r.query.qid, r.query.text) for r in requests], columns=["qid", "query"])


def qrels_frame(qrels: Mapping[str, Mapping[str, int]]) -> pd.DataFrame:
    """PyTerrier qrels (``qid, docno, label``)."""
    rows = [(qid, docno, int(label)) for qid, judged in qrels.items() for docno, label in judged.items()]
    return pd.DataFrame(rows, columns=["qid", "docno", "label"])


class RearankTransformer(pt.Transformer):
    """Rerank a PyTerrier result frame with a :class:`rearank.Reranker`: given, or built from the same arguments
    (``RearankTransformer("models/rearank-7b", backend="vllm", method="groupwise")``).

    Within a query the input order is the rows' ``rank`` (else descending ``score``, else row order). Output: the
    same rows and columns, each query's rows in the new order, ``score`` = ``(n - rank) / n`` and ``rank`` =
    0, 1, …; queries keep their first-appearance order. ``text_field`` names the passage column; ``score``, when
    present, is the first-stage score (groupwise fusion uses it).
    """

    def __init__(self, model: Reranker | str | None = None, *, text_field: str = "text", **face: Any) -> None:
        if isinstance(model, Reranker):
            if face:
                raise RearankError("give a Reranker or the arguments to build one, not both")
            self.reranker = model
        else:
            self.reranker = Reranker(model, **face)
        self.text_field = text_field

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        """Rerank every query of ``inp`` (one batched call over all of them)."""
        missing = [c for c in (*REQUIRED, self.text_field) if c not in inp.columns]
        if missing:
            raise RearankError(f"the frame lacks column(s) {', '.join(missing)}; it needs qid, query, docno and "
                               f"{self.text_field!r} (add text with pt.text.get_text or a run with texts)")
        if inp.empty:
            return inp.assign(score=pd.Series(dtype=float), rank=pd.Series(dtype=int))
        frame = inp.reset_index(drop=True)
        frame["qid"] = frame["qid"].astype(str)
        order_by = [c for c in ("rank", "score") if c in frame.columns][:1]
        requests, rows = [], []
        for qid, group in frame.groupby("qid", sort=False):
            if order_by:
                group = group.sort_values(order_by[0], ascending=order_by[0] == "rank", kind="stable")
            queries = group["query"].unique()
            if len(queries) != 1:
                raise RearankError(f"query {qid!r} has {len(queries)} different query texts in the frame")
            n = len(group)
            titles = group["title"] if "title" in group.columns else [""] * n
            scores = group["score"] if "score" in group.columns else [float(n - i) for i in range(n)]
            candidates = [Candidate(str(docno), float(score), str(text), title if isinstance(title, str) else "")
                          for docno, text, title, score in zip(group["docno"], group[self.text_field], titles, scores)]
            requests.append(Request(Query(qid, str(queries[0])), candidates))
            rows.append(group.index.to_numpy())
        rankings = self.reranker.rerank_many(requests)
        parts = []
        for index, ranking in zip(rows, rankings):
            part = frame.loc[index[ranking.order]].copy()
            part["score"] = rank_scores(len(part))
            part["rank"] = range(len(part))
            parts.append(part)
        return pd.concat(parts, ignore_index=True)
