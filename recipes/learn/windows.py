"""The two tasks of ``make train-learn``, as windows of ``size`` real passages (:data:`DEFAULT_SET_SIZE`, 4; the
fallback ``--set-size 2``) in verl's parquet row shape.

* ``phrase`` (controlled: the signal is built, labelled as such): ``size`` passages of one query's BM25 top-100;
  the query is the last :data:`PHRASE_WORDS` words of one of them as the prompt shows it (found in no other of
  them); that passage is the one to pick (template ``phrase.yaml``: the identifier follows the query's words in the
  prompt). Learnable by reading, so it tests whether the reward, advantages and updates move the policy the right
  way. (A phrase cut from the middle of a passage, its id 1-9 words further on, stayed at chance after 1,536 SFT
  examples; the last words were learnt from 384: docs/training.md.)
* ``relevance`` (the real task): the topic's text, after the passages (template ``best.yaml``: 6 words a
  passage); one passage judged relevant (grade >= 2) and ``size - 1`` judged not relevant (grade 0) from its
  BM25 top-100. Held out (:func:`heldout`): one window per relevant passage of the run, so no two held-out
  windows share their relevant passage. The warm start trains on :func:`lexical_windows`: labels from query-term
  overlap, not from the judgments.

In all of them the best passage's position cycles over 1..size (no position gives the answer for free) and the
passages are cut to the task's template's budget (:data:`TEMPLATES`). Each window is a row as ``rearank synth``
writes it (``prompt`` chat messages, ``reward_model.ground_truth`` = ``{"labels": [...]}``), plus ``extra_info``:
``target`` (the SFT target id), ``qid``, ``query`` and ``shown`` (the passages as the prompt shows them, for the
lexical baselines).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

from rearank.errors import RearankError
from rearank.prompts.builder import build_messages, render_passages
from rearank.types import Candidate, Request
from recipes.learn.lexical import overlap, unique_best

TEMPLATES = {"phrase": Path(__file__).with_name("phrase.yaml"), "relevance": Path(__file__).with_name("best.yaml")}
TASKS = tuple(TEMPLATES)
#: Passages a window shows unless ``--set-size`` says otherwise; every function takes its ``size``.
DEFAULT_SET_SIZE = 4
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
            "extra_info": {"qid": qid, "index": index, "target": labels.index(max(labels)) + 1, "query": query,
                           "shown": list(texts)}}


def windows(task: str, dataset: str, requests: Sequence[Request], qrels: dict[str, dict[str, int]],
            per_query: int, seed: int, *, size: int) -> Iterator[dict]:
    """Up to ``per_query`` windows of ``size`` passages of each query (fewer where the query cannot give them), in
    query order."""
    rng = random.Random(seed)
    index = 0
    for request in requests:
        grades = qrels.get(request.query.qid, {})
        pool = [c for c in request.candidates if c.text.strip()]
        relevant = [c for c in pool if grades.get(c.docid, -1) >= RELEVANT]
        judged_zero = [c for c in pool if grades.get(c.docid, -1) == 0]
        for _ in range(per_query):
            target = index % size
            if task == "phrase":
                if len(pool) < size:
                    break
                chosen = rng.sample(pool, size)
                texts = render_passages(chosen, TEMPLATES[task])
                query = _phrase(texts, target)
                if query is None:
                    continue
                labels = [int(i == target) for i in range(size)]
            else:
                if not relevant or len(judged_zero) < size - 1:
                    break
                chosen = rng.sample(judged_zero, size - 1)
                chosen.insert(target, rng.choice(relevant))
                texts = render_passages(chosen, TEMPLATES[task])
                query = request.query.text
                labels = [grades[c.docid] for c in chosen]
            yield _row(task, dataset, request.query.qid, query, texts, labels, index)
            index += 1


def heldout(dataset: str, requests: Sequence[Request], qrels: dict[str, dict[str, int]], n: int,
            seed: int, *, size: int) -> list[dict]:
    """``n`` relevance windows of ``size`` passages, each built around a different relevant passage of the run
    (grade >= 2, with ``size - 1`` of its query's judged-0 passages drawn at random), the relevant position cycling
    over 1..size in the order drawn (so each position holds it equally often when ``n`` is a multiple of ``size``).
    Fewer distinct relevant passages than ``n`` is an error naming how many there are."""
    rng = random.Random(seed)
    pairs = []
    for request in requests:
        grades = qrels.get(request.query.qid, {})
        pool = [c for c in request.candidates if c.text.strip()]
        zero = [c for c in pool if grades.get(c.docid, -1) == 0]
        if len(zero) >= size - 1:
            pairs += [(request, c, zero) for c in pool if grades.get(c.docid, -1) >= RELEVANT]
    if len(pairs) < n:
        raise RearankError(f"{dataset}: {len(pairs)} relevant passages with {size - 1} judged-0 ones beside them, "
                           f"{n} held-out windows asked; lower --heldout")
    rows = []
    for index, (request, relevant, zero) in enumerate(rng.sample(pairs, n)):
        chosen = rng.sample(zero, size - 1)
        chosen.insert(index % size, relevant)
        grades = qrels[request.query.qid]
        rows.append(_row("relevance", dataset, request.query.qid, request.query.text,
                         render_passages(chosen, TEMPLATES["relevance"]), [grades[c.docid] for c in chosen], index))
    return rows


def lexical_windows(dataset: str, requests: Sequence[Request], per_query: int, seed: int, *, size: int,
                    foreign: float = 0.5, tries: int = 20) -> Iterator[dict]:
    """Warm-start windows labelled by query-term overlap, not by judgments: ``size`` passages as the relevance prompt
    shows them, the one with the unique highest overlap on the shown words being the target (labels 1 for it, 0
    for the others), its position cycling over 1..size; each of the others comes from another query's run with
    probability ``foreign`` (else from the same run). A draw whose best overlap is shared is drawn again, up to
    ``tries`` times."""
    rng = random.Random(seed)
    pools = [[c for c in r.candidates if c.text.strip()] for r in requests]
    index = 0
    for q, request in enumerate(requests):
        if len(requests) < 2 or len(pools[q]) < size:
            continue
        for _ in range(per_query):
            target = index % size
            for _ in range(tries):
                others: list[Candidate] = []
                while len(others) < size - 1:
                    source = q if rng.random() >= foreign else rng.choice([i for i in range(len(pools)) if i != q])
                    pick = rng.choice(pools[source])
                    if pick not in others:
                        others.append(pick)
                texts = render_passages([rng.choice(pools[q]), *others], TEMPLATES["relevance"])
                scores = overlap(request.query.text, texts)
                if unique_best(scores) == 0:
                    texts.insert(target, texts.pop(0))
                    labels = [int(i == target) for i in range(size)]
                    yield _row("relevance", dataset, request.query.qid, request.query.text, texts, labels, index)
                    index += 1
                    break


def balanced_order(rows: Sequence[dict], seed: int, *, size: int) -> list[dict]:
    """``rows`` (windows of ``size`` passages) shuffled, then reordered so that every run of ``size`` consecutive
    rows holds each target position once (as far as the rows allow): a GRPO batch of a multiple of ``size`` prompts
    is balanced by the best passage's position."""
    rng = random.Random(seed)
    buckets: dict[int, list[dict]] = {k: [] for k in range(1, size + 1)}
    for row in rng.sample(list(rows), len(rows)):
        buckets[row["extra_info"]["target"]].append(row)
    rounds = min(len(b) for b in buckets.values())
    return [buckets[k][i] for i in range(rounds) for k in range(1, size + 1)]
