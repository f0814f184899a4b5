"""The two tasks of ``make train-learn``, as 4-passage windows of real passages in verl's parquet row shape.

* ``phrase`` (controlled: the signal is built, labelled as such): four passages of one query's BM25 top-100; the
  query is the last :data:`PHRASE_WORDS` words of one of them as the prompt shows it (found in no other of the
  four); that passage is the one to pick (template ``phrase.yaml``: the identifier follows the query's words in the
  prompt). Learnable by reading, so it tests whether the reward, advantages and updates move the policy the right
  way. (A phrase cut from the middle of a passage, its id 1-9 words further on, stayed at chance after 1,536 SFT
  examples; the last words were learnt from 384: docs/training.md.)
* ``relevance`` (the real task): the topic's text; one passage judged relevant (grade >= 2) and three judged not
  relevant (grade 0) from its BM25 top-100.

In both, the best passage's position cycles over 1..4 (no position gives the answer for free) and the passages are
cut to the task's template's budget (:data:`TEMPLATES`). Each window is a row as ``rearank synth`` writes it
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

TEMPLATES = {"phrase": Path(__file__).with_name("phrase.yaml"), "relevance": Path(__file__).with_name("best.yaml")}
TASKS = tuple(TEMPLATES)
SET_SIZE = 4
PHRASE_WORDS = 4
RELEVANT = 2


def _phrase(texts: Sequence[str], target: int) -> str | None:
    """The last ``PHRASE_WORDS`` words of ``texts[target]``, or None where another text contains them
    (case-insensitive), they hold no word character or a bracket (an id lookalike), or the text is shorter."""
    words = texts[target].split()
    phrase = " ".join(words[-PHRASE_WORDS:])
    others = [" ".join(t.lower().split()) for i, t in enumerate(texts) if i != target]
    if (len(words) < PHRASE_WORDS or not re.search(r"\w", phrase) or re.search(r"[\[\]]", phrase)
            or any(phrase.lower() in other for other in others)):
        return None
    return phrase


def _row(task: str, dataset: str, qid: str, query: str, texts: Sequence[str], labels: list[int],
         index: int) -> dict:
    return {"data_source": f"learn/{task}/{dataset}",
            "prompt": build_messages(query, list(texts), TEMPLATES[task], clean=False),
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
                texts = render_passages(chosen, TEMPLATES[task])
                query = _phrase(texts, target)
                if query is None:
                    continue
                labels = [int(i == target) for i in range(SET_SIZE)]
            else:
                if not relevant or len(judged_zero) < SET_SIZE - 1:
                    break
                chosen = rng.sample(judged_zero, SET_SIZE - 1)
                chosen.insert(target, rng.choice(relevant))
                texts = render_passages(chosen, TEMPLATES[task])
                query = request.query.text
                labels = [grades[c.docid] for c in chosen]
            yield _row(task, dataset, request.query.qid, query, texts, labels, index)
            index += 1
