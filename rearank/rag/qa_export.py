"""ir_datasets QA collections -> DPR ``ctxs`` JSONL that :func:`rearank.io.qa.load_qa` reads.

The ``dpr-w100`` subsets (``natural-questions/dev|train``, ``trivia-qa/dev|train``; they need
``pip install "ir_datasets[ijson]"`` and a download of the 21M-passage Wikipedia collection) carry each question's
gold answers, and their qrels judge a pool of passages per question: DPR's positives (grade 1-2), hard negatives
(0) and negatives (-1). A question becomes one record: ``question``, ``answers``, and ``ctxs`` = its judged
passages (``id``, ``title``, ``text``, ``hasanswer``: a gold answer occurs in the text, DPR's rule through
:func:`rearank.measures.answers.has_answer`, ``isgold``: a positive), in an order shuffled by a seed and the question
id, so that the file's order carries no hint of the judgments (``--selector none`` is a random first stage there).

    rearank data qa-export dpr-w100/natural-questions/dev --output nq-dev.jsonl --limit 1000
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rearank.errors import MissingDataError, RearankError
from rearank.io.files import atomic_write
from rearank.measures.answers import has_answer

#: The ir_datasets ids this exporter knows; any dataset with answers on its queries and qrels works.
QA_DATASETS = ("dpr-w100/natural-questions/dev", "dpr-w100/natural-questions/train", "dpr-w100/trivia-qa/dev",
               "dpr-w100/trivia-qa/train")


def load_dataset(name: str) -> Any:
    """``ir_datasets.load(name)``, with a one-line error when ir_datasets or the id is missing."""
    try:
        import ir_datasets
    except ImportError as err:
        raise MissingDataError(f"{name}: needs ir_datasets ({err}); `pip install 'ir_datasets[ijson]'`") from None
    try:
        return ir_datasets.load(name)
    except KeyError:
        raise RearankError(f"unknown ir_datasets id {name!r}; QA collections: {', '.join(QA_DATASETS)}") from None


def qa_records(dataset: Any, *, limit: int | None = None, seed: int = 0) -> Iterator[dict[str, Any]]:
    """DPR ``ctxs`` records of the first ``limit`` queries of ``dataset`` that have judged passages."""
    if not (dataset.has_queries() and dataset.has_qrels() and dataset.has_docs()):
        raise RearankError("a QA export needs queries (with answers), qrels and docs in the dataset")
    judged: dict[str, dict[str, int]] = defaultdict(dict)
    for qrel in dataset.qrels_iter():
        judged[qrel.query_id].setdefault(qrel.doc_id, qrel.relevance)
    store = dataset.docs_store()
    done = 0
    for query in dataset.queries_iter():
        answers = list(getattr(query, "answers", ()) or ())
        if not answers:
            raise RearankError(f"query {query.query_id!r} has no answers: not a QA dataset")
        pool = judged.get(query.query_id)
        if not pool:
            continue
        if limit is not None and done >= limit:
            return
        ids = sorted(pool)
        random.Random(f"{seed}/{query.query_id}").shuffle(ids)
        docs = store.get_many(ids)
        missing = [i for i in ids if i not in docs]
        if missing:
            raise RearankError(f"query {query.query_id!r}: judged passages missing from the collection: "
                               f"{', '.join(missing[:5])}")
        ctxs = [{"id": i, "title": getattr(docs[i], "title", ""), "text": docs[i].text,
                 "hasanswer": has_answer(docs[i].text, answers), "isgold": pool[i] > 0}
                for i in ids]
        yield {"id": query.query_id, "question": query.text, "answers": answers, "ctxs": ctxs}
        done += 1


def export_qa(dataset: Any, output: str | Path, *, limit: int | None = None, seed: int = 0) -> int:
    """Write the QA records of ``dataset`` (an ir_datasets id or dataset) to ``output`` (JSONL, ``.gz`` allowed),
    all at once (write-then-rename); returns the number of questions."""
    if isinstance(dataset, str):
        dataset = load_dataset(dataset)
    count = 0
    with atomic_write(output) as handle:
        for record in qa_records(dataset, limit=limit, seed=seed):
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
    return count
