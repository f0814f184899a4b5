"""The two tasks of ``make train-learn``, as 4-passage windows of real passages in verl's parquet row shape.

* ``phrase`` (controlled: the signal is built, labelled as such): four passages of one query's BM25 top-100; the
  query is a phrase of :data:`PHRASE_WORDS` consecutive words cut from one of them as the prompt shows it (and
  found in no other of the four); that passage is the one to pick. Learnable by reading, so it tests whether the
  reward, advantages and updates move the policy the right way.
* ``relevance`` (the real task): the topic's text; one passage judged relevant (grade >= 2) and three judged not
  relevant (grade 0) from its BM25 top-100.

In both, the best passage's position cycles over 1..4 (no position gives the answer for free) and the passages are
cut to the template's budget (:data:`TEMPLATE`). Each window is a row as ``rearank synth`` writes it
(``prompt`` chat messages, ``reward_model.ground_truth`` = ``{"labels": [...]}``), plus ``extra_info.target``: the
SFT target id.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

from rearank.prompts.builder import build_messages, render_passages
from rearank.types import Request

TEMPLATE = Path(__file__).with_name("best.yaml")
TASKS = ("phrase", "relevance")
SET_SIZE = 4
PHRASE_WORDS = 4
RELEVANT = 2


def _phrase(texts: Sequence[str], target: int, rng: random.Random) -> str | None:
    """``PHRASE_WORDS`` consecutive words of ``texts[target]`` that no other text contains (case-insensitive)."""
    words = texts[target].split()
    starts = list(range(len(words) - PHRASE_WORDS + 1))
    rng.shuffle(starts)
    others = [" ".join(t.lower().split()) for i, t in enumerate(texts) if i != target]
    for start in starts:
        phrase = " ".join(words[start:start + PHRASE_WORDS])
        if re.search(r"\w", phrase) and not any(phrase.lower() in other for other in others):
            return phrase
    return None


def _row(task: str, dataset: str, qid: str, query: str, texts: Sequence[str], labels: list[int],
         index: int) -> dict:
    return {"data_source": f"learn/{task}/{dataset}",
            "prompt": build_messages(query, list(texts), TEMPLATE, clean=False),
            "ability": "rerank",
            "reward_model": {"style": "rule", "ground_truth": json.dumps({"labels": labels})},
            "extra_info": {"qid": qid, "index": index, "target": labels.index(max(labels)) + 1}}


def windows(task: str, dataset: str, requests: Sequence[Request], qrels: dict[str, dict[str, int]],
            per_query: int, seed: int) -> Iterator[dict]:
    """Up to ``per_query`` windows of each query (fewer where the query cannot give them), in query order."""
    rng = random.Random(seed)
    index = 0
    for request in requests:
        grades = qrels.get(request.query.qid, {})
        pool = [c for c in request.candidates if c.text.strip()]
        relevant = [c for c in pool if grades.get(c.docid, -1) >= RELEVANT]
        judged_zero = [c for c in pool if grades.get(c.docid, -1) == 0]
        for _ in range(per_query):
            target = index % SET_SIZE
            if task == "phrase":
                if len(pool) < SET_SIZE:
                    break
                chosen = rng.sample(pool, SET_SIZE)
                texts = render_passages(chosen, TEMPLATE)
                query = _phrase(texts, target, rng)
                if query is None:
                    continue
                labels = [int(i == target) for i in range(SET_SIZE)]
            else:
                if not relevant or len(judged_zero) < SET_SIZE - 1:
                    break
                chosen = rng.sample(judged_zero, SET_SIZE - 1)
                chosen.insert(target, rng.choice(relevant))
                texts = render_passages(chosen, TEMPLATE)
                query = request.query.text
                labels = [grades[c.docid] for c in chosen]
            yield _row(task, dataset, request.query.qid, query, texts, labels, index)
            index += 1
