"""The groupwise reranker: score groups of documents jointly, average, optionally fuse with the retriever.

Each query's top-k is cut into groups (a balanced partition, or groups sliding by ``group_step``); every
group is one LLM call that answers a 0-10 score per document. A document's score is the mean over the
groups it appears in, over ``shuffles`` orderings of the top-k (the first keeps the retriever order, the
others are random shuffles seeded by ``seed`` and the qid). Groups are independent, so the groups of many
queries are batched together (``batch_size`` prompts per backend call). A group whose answer yields no
valid score (no JSON object, or none of its ids) scores its documents by the ``fallback``.
"""

from __future__ import annotations

import math
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

from tqdm import tqdm

from rearank.backends.base import Backend, Generation, Prompt, SamplingSettings
from rearank.backends.oracle import OracleBackend
from rearank.driver import BACKEND_ERROR, check_budget
from rearank.errors import RearankError
from rearank.grouprank.oracle import GroupOracleBackend
from rearank.grouprank.parser import MAX_SCORE, parse_scores
from rearank.grouprank.prompt import load_group_template
from rearank.prompts import BudgetLike, PromptTemplate, build_messages, render_passages
from rearank.prompts.builder import Tokenizer
from rearank.types import Request, Result, WindowTrace

#: What scores the documents of a group whose answer gives no valid score.
FALLBACKS = ("retriever", "zero")
#: How ``fusion_weight`` fuses: ``minmax`` normalises both scores per query; ``raw`` (GroupRank's released
#: inference) adds ``alpha * score / 10`` and ``(1 - alpha) * retriever score`` as they are.
FUSIONS = ("minmax", "raw")


def partition(n: int, size: int) -> list[tuple[int, int]]:
    """Cut ``range(n)`` into ``ceil(n / size)`` consecutive groups of near-equal size (at most ``size``)."""
    if n <= 0:
        return []
    count = math.ceil(n / size)
    bounds = [i * n // count for i in range(count + 1)]
    return list(pairwise(bounds))


def sliding_groups(n: int, size: int, step: int) -> list[tuple[int, int]]:
    """Groups of ``size`` starting every ``step`` ranks; the last one is moved back to end at ``n``."""
    if n <= size:
        return [(0, n)] if n > 0 else []
    spans = []
    start = 0
    while start + size < n:
        spans.append((start, start + size))
        start += step
    spans.append((n - size, n))
    return spans


def fallback_scores(members: Sequence[int], fallback: str, n: int) -> list[float]:
    """Scores for a group without a valid answer, out of a top-k of ``n``.

    ``retriever``: ``10 * (1 - rank / n)`` from each document's first-stage rank over the whole top-k, so a
    run where every group fails keeps the first-stage order; ``zero``: 0 for every document.
    """
    if fallback == "zero":
        return [0.0] * len(members)
    return [MAX_SCORE * (1 - index / n) for index in members]


def min_max(values: Sequence[float]) -> list[float]:
    """Scale to [0, 1] by the minimum and maximum; all zeros when the values are all equal."""
    low, high = min(values, default=0.0), max(values, default=0.0)
    if high <= low:
        return [0.0] * len(values)
    return [(v - low) / (high - low) for v in values]


def check_group_settings(
    *, group_size: int, group_step: int | None, shuffles: int, fusion_weight: float | None, fallback: str,
    top_k: int, batch_size: int, passage_budget: BudgetLike = None, fusion: str = "minmax",
) -> None:
    """Raise :class:`RearankError` for groupwise settings that cannot run (checked before loading a model)."""
    for name, value, low in (("group_size", group_size, 2), ("shuffles", shuffles, 1), ("top_k", top_k, 1),
                             ("batch_size", batch_size, 1)):
        if value < low:
            raise RearankError(f"{name} must be at least {low}, got {value}")
    if group_step is not None and not 1 <= group_step <= group_size:
        raise RearankError(f"group_step must be between 1 and group_size ({group_size}), got {group_step}")
    if fusion_weight is not None and not 0.0 <= fusion_weight <= 1.0:
        raise RearankError(f"fusion_weight must be between 0 and 1, got {fusion_weight}")
    if fallback not in FALLBACKS:
        raise RearankError(f"fallback must be one of {', '.join(FALLBACKS)}, got {fallback!r}")
    if fusion not in FUSIONS:
        raise RearankError(f"fusion must be one of {', '.join(FUSIONS)}, got {fusion!r}")
    check_budget(passage_budget)


@dataclass
class GroupState:
    """A query in progress: its top-k texts, summed group scores, counts and traces."""

    request: Request
    texts: list[str]
    pending: int = 0
    totals: list[float] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    traces: list[WindowTrace] = field(default_factory=list)


@dataclass(frozen=True)
class Group:
    """One LLM call: the candidate indices it presents, in presented order, and where it came from."""

    members: tuple[int, ...]
    start: int
    end: int
    shuffle: int


class GroupReranker:
    """Rerank requests with a groupwise LLM (GroupRank style): joint 0-10 scores per group of documents.

    ``group_size`` documents per group; ``group_step=None`` partitions the top-k, a step slides groups
    (documents scored in several groups get the mean). ``shuffles`` > 1 adds random orderings of the top-k
    (a self-ensemble) and averages. ``fusion_weight=alpha`` ranks by ``alpha * rerank + (1 - alpha) *
    retriever`` after min-max normalizing both per query (``fusion="raw"``: ``alpha * score / 10 + (1 - alpha)
    * retriever`` without normalisation); None ranks by the rerank score alone. ``shuffle_all`` shuffles every
    ordering, the first one too (GroupRank's released inference); by default the first keeps the retriever
    order. Passages are cut to the template's budget or ``passage_budget``. Ties keep
    the retriever order; candidates beyond ``top_k`` keep their order after the reranked ones. Result
    candidates keep their retriever scores; the order is the result. One trace per group (``pass_index`` =
    shuffle, ``permutation`` = the group's members by score). The listwise :class:`OracleBackend` is
    replaced by its groupwise counterpart over the same qrels.
    """

    def __init__(
        self,
        backend: Backend,
        template: str | Path | PromptTemplate | None = "grouprank",
        group_size: int = 20,
        group_step: int | None = None,
        shuffles: int = 1,
        seed: int = 0,
        fusion_weight: float | None = None,
        fallback: str = "retriever",
        top_k: int = 100,
        settings: SamplingSettings | None = None,
        batch_size: int = 32,
        passage_budget: BudgetLike = None,
        tokenizer: Tokenizer | None = None,
        fusion: str = "minmax",
        shuffle_all: bool = False,
    ) -> None:
        check_group_settings(group_size=group_size, group_step=group_step, shuffles=shuffles,
                             fusion_weight=fusion_weight, fallback=fallback, top_k=top_k, batch_size=batch_size,
                             passage_budget=passage_budget, fusion=fusion)
        if isinstance(backend, OracleBackend):
            backend = GroupOracleBackend(backend.qrels)
        self.backend = backend
        self.template = load_group_template(template)
        self.group_size, self.group_step, self.shuffles, self.seed = group_size, group_step, shuffles, seed
        self.fusion_weight, self.fallback, self.top_k = fusion_weight, fallback, top_k
        self.settings = settings or SamplingSettings()
        self.batch_size = batch_size
        self.passage_budget = passage_budget
        self.fusion, self.shuffle_all = fusion, shuffle_all
        self.tokenizer = tokenizer if tokenizer is not None else getattr(backend, "tokenizer", None)

    def spans(self, n: int) -> list[tuple[int, int]]:
        """The ``(start, end)`` groups over a top-k of ``n`` documents (none for fewer than 2)."""
        if n < 2:
            return []
        if self.group_step is None:
            return partition(n, self.group_size)
        return sliding_groups(n, self.group_size, self.group_step)

    def groups(self, request: Request) -> list[Group]:
        """Every group of one request, shuffle by shuffle; members are 0-based candidate indices."""
        n = min(len(request.candidates), self.top_k)
        spans = self.spans(n)
        groups = []
        for shuffle in range(self.shuffles if spans else 0):
            order = list(range(n))
            if shuffle or self.shuffle_all:
                random.Random(f"{self.seed}/{request.query.qid}/{shuffle}").shuffle(order)
            groups.extend(Group(tuple(order[start:end]), start, end, shuffle) for start, end in spans)
        return groups

    def rerank(
        self,
        requests: Sequence[Request],
        on_result: Callable[[Result], None] | None = None,
        progress: bool = True,
    ) -> list[Result]:
        """Rerank every request; return results in input order, calling ``on_result`` as each query finishes."""
        results: list[Result | None] = [None] * len(requests)
        total = sum(len(self.spans(min(len(r.candidates), self.top_k))) * self.shuffles for r in requests)
        bar = tqdm(total=total, unit="group", disable=not progress, desc="rerank groupwise", dynamic_ncols=True)
        queue: deque[tuple[int, GroupState, Group]] = deque()
        pending = iter(enumerate(requests))
        completion_tokens = 0
        started = time.perf_counter()

        def finish(index: int, query: GroupState) -> None:
            results[index] = self.result(query)
            if on_result is not None:
                on_result(results[index])

        try:
            while True:
                while len(queue) < self.batch_size:
                    item = next(pending, None)
                    if item is None:
                        break
                    query, groups = self.start(item[1])
                    if not groups:
                        finish(item[0], query)
                    queue.extend((item[0], query, group) for group in groups)
                if not queue:
                    break
                batch = [queue.popleft() for _ in range(min(self.batch_size, len(queue)))]
                generations = self._generate([self.prompt(query, group) for _, query, group in batch])
                for (index, query, group), generation in zip(batch, generations):
                    self.apply(query, group, generation)
                    completion_tokens += generation.completion_tokens
                    if query.pending == 0:
                        finish(index, query)
                bar.update(len(batch))
                elapsed = max(time.perf_counter() - started, 1e-9)
                bar.set_postfix(tok_s=f"{completion_tokens / elapsed:.1f}", refresh=False)
        finally:
            bar.close()
        return [r for r in results if r is not None]

    def start(self, request: Request) -> tuple[GroupState, list[Group]]:
        """The state of ``request`` before any group is scored, and its groups."""
        groups = self.groups(request)
        n = min(len(request.candidates), self.top_k) if groups else 0
        texts = render_passages(request.candidates[:n], self.template, budget=self.passage_budget,
                                tokenizer=self.tokenizer)
        query = GroupState(request, texts, pending=len(groups), totals=[0.0] * n, counts=[0] * n)
        return query, groups

    def prompt(self, query: GroupState, group: Group) -> Prompt:
        """The prompt of one group of ``query``."""
        request = query.request
        messages = build_messages(request.query.text, [query.texts[i] for i in group.members], self.template,
                                  clean=False)
        docids = tuple(request.candidates[i].docid for i in group.members)
        return Prompt(messages=tuple(messages), qid=request.query.qid, docids=docids)

    def _generate(self, prompts: list[Prompt]) -> list[Generation]:
        generations = self.backend.generate(prompts, self.settings)
        if len(generations) != len(prompts):
            raise RearankError(
                f"backend {getattr(self.backend, 'name', type(self.backend).__name__)!r} returned "
                f"{len(generations)} generations for {len(prompts)} prompts"
            )
        return list(generations)

    def apply(self, query: GroupState, group: Group, generation: Generation) -> None:
        """Score the members of ``group`` from ``generation`` (or the fallback), add its trace."""
        size = len(group.members)
        if generation.finish_reason == BACKEND_ERROR:
            status, scores = BACKEND_ERROR, None
        else:
            parsed = parse_scores(generation.text, size)
            status = parsed.status
            scores = parsed.filled() if parsed.json_ok and parsed.n_scored else None
        if scores is None:
            scores = fallback_scores(group.members, self.fallback, len(query.totals))
        for index, score in zip(group.members, scores):
            query.totals[index] += score
            query.counts[index] += 1
        query.pending -= 1
        query.traces.append(WindowTrace(
            qid=query.request.query.qid, start=group.start, end=group.end, pass_index=group.shuffle,
            prompt_tokens=generation.prompt_tokens, completion_tokens=generation.completion_tokens,
            raw_output=generation.text, permutation=tuple(sorted(range(size), key=lambda i: -scores[i])),
            status=status, latency_s=generation.latency_s,
        ))

    def result(self, query: GroupState) -> Result:
        """The reranked result of ``query`` once all its groups are applied."""
        candidates = query.request.candidates
        n = len(query.totals)
        scores = [total / count if count else 0.0 for total, count in zip(query.totals, query.counts)]
        if self.fusion_weight is not None and n and self.fusion == "raw":
            alpha = self.fusion_weight
            scores = [alpha * s / MAX_SCORE + (1 - alpha) * c.score for s, c in zip(scores, candidates[:n])]
        elif self.fusion_weight is not None and n:
            alpha = self.fusion_weight
            retriever = min_max([c.score for c in candidates[:n]])
            scores = [alpha * r + (1 - alpha) * b for r, b in zip(min_max(scores), retriever)]
        order = sorted(range(n), key=lambda i: (-scores[i], i))
        return Result(query.request.query, [candidates[i] for i in order] + list(candidates[n:]), query.traces)
