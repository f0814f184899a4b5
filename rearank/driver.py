"""The listwise reranking driver: sliding windows over many queries, batched across queries.

Windows of one query depend on each other (each reorders what the previous left), so a query has at
most one window in flight. Across queries they are independent: the driver keeps ``batch_size``
queries active and sends the next window of each to the backend in one call, so an inference engine
sees full batches. A query leaves the active set when its schedule is done and the next one enters;
results stream out through ``on_result`` in completion order. With a deterministic backend the
output equals reranking the queries one at a time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from rearank.answer import apply_permutation, parse_answer
from rearank.backends.base import Backend, Generation, Prompt, SamplingSettings
from rearank.errors import RearankError
from rearank.prompts import BudgetLike, PromptTemplate, as_budget, build_messages, load_template, render_passages
from rearank.prompts.builder import Tokenizer
from rearank.types import Request, Result, WindowTrace
from rearank.window import schedule

#: Trace status of a window whose generation failed in the backend (its input order is kept).
BACKEND_ERROR = "error"


@dataclass
class QueryState:
    """A query in progress: current order of its top-k head, its remaining windows, its traces."""

    request: Request
    texts: list[str]
    windows: list[tuple[int, int, int]]  # (start, end, pass_index)
    order: list[int] = field(default_factory=list)
    traces: list[WindowTrace] = field(default_factory=list)

    def result(self) -> Result:
        cands = self.request.candidates
        head = [cands[i] for i in self.order]
        return Result(self.request.query, head + list(cands[len(self.order):]), self.traces)


def check_settings(
    *, window: int, step: int, passes: int, top_k: int, batch_size: int, passage_budget: BudgetLike = None
) -> None:
    """Raise :class:`RearankError` for window settings the driver cannot run (checked before loading a model)."""
    check_budget(passage_budget)
    for name, value, low in (("window", window, 2), ("step", step, 1), ("passes", passes, 1), ("top_k", top_k, 1),
                             ("batch_size", batch_size, 1)):
        if value < low:
            raise RearankError(f"{name} must be at least {low}, got {value}")
    if step > window:
        raise RearankError(f"step ({step}) must not exceed window ({window}), or some passages are never compared")


def check_budget(passage_budget: BudgetLike) -> None:
    """Raise :class:`RearankError` for a passage budget that does not parse (None: the template's)."""
    try:
        as_budget(passage_budget)
    except ValueError as err:
        raise RearankError(str(err)) from None


class Reranker:
    """Rerank requests with a listwise LLM over sliding windows (Rearank / RankGPT style).

    ``window``/``step``/``passes`` set the schedule (:func:`rearank.window.schedule`) over the first
    ``top_k`` candidates; candidates beyond ``top_k`` keep their order after them. ``batch_size`` is the
    number of windows (from as many queries) per backend call. Passages are rendered with
    :func:`rearank.prompts.render_passages`, cut to the template's declared budget or ``passage_budget``
    (``400c``, ``300 words``, ``300 tokens`` -- tokens of ``tokenizer``, by default the backend's ``tokenizer``
    attribute if it has one, else whitespace words).
    """

    def __init__(
        self,
        backend: Backend,
        template: str | Path | PromptTemplate = "rearank",
        window: int = 20,
        step: int = 10,
        passes: int = 1,
        top_k: int = 100,
        settings: SamplingSettings | None = None,
        batch_size: int = 32,
        passage_budget: BudgetLike = None,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        check_settings(window=window, step=step, passes=passes, top_k=top_k, batch_size=batch_size,
                       passage_budget=passage_budget)
        self.backend = backend
        self.template = load_template(template)
        self.window, self.step, self.passes, self.top_k = window, step, passes, top_k
        self.settings = settings or SamplingSettings()
        self.batch_size = batch_size
        self.passage_budget = passage_budget
        self.tokenizer = tokenizer if tokenizer is not None else getattr(backend, "tokenizer", None)

    def windows(self, n_candidates: int) -> list[tuple[int, int, int]]:
        """The ``(start, end, pass_index)`` windows for a list of ``n_candidates`` (none for fewer than 2)."""
        n = min(n_candidates, self.top_k)
        if n < 2:
            return []
        one = schedule(n, self.window, self.step)
        return [(start, end, p) for p in range(self.passes) for start, end in one]  # window_count() of them

    def rerank(
        self,
        requests: Sequence[Request],
        on_result: Callable[[Result], None] | None = None,
        progress: bool = True,
    ) -> list[Result]:
        """Rerank every request; return results in input order, calling ``on_result`` as each query finishes."""
        results: list[Result | None] = [None] * len(requests)
        pending: Iterator[tuple[int, Request]] = iter(enumerate(requests))
        active: list[tuple[int, QueryState]] = []
        bar = tqdm(total=len(requests), unit="query", disable=not progress, desc="rerank", dynamic_ncols=True)
        windows_done = completion_tokens = 0
        started = time.perf_counter()

        def finish(index: int, query: QueryState) -> None:
            result = query.result()
            results[index] = result
            if on_result is not None:
                on_result(result)
            bar.update(1)

        try:
            while True:
                while len(active) < self.batch_size:
                    item = next(pending, None)
                    if item is None:
                        break
                    index, query = item[0], self.start(item[1])
                    if query.windows:
                        active.append((index, query))
                    else:
                        finish(index, query)
                if not active:
                    break
                generations = self._generate([self.prompt(q) for _, q in active])
                still: list[tuple[int, QueryState]] = []
                for (index, query), generation in zip(active, generations):
                    self.apply(query, generation)
                    completion_tokens += generation.completion_tokens
                    if query.windows:
                        still.append((index, query))
                    else:
                        finish(index, query)
                windows_done += len(active)
                active = still
                elapsed = max(time.perf_counter() - started, 1e-9)
                bar.set_postfix(windows=windows_done, tok_s=f"{completion_tokens / elapsed:.1f}", refresh=False)
        finally:
            bar.close()
        return [r for r in results if r is not None]

    def start(self, request: Request) -> QueryState:
        """The state of ``request`` before its first window: first-stage order, passage texts, its schedule."""
        windows = self.windows(len(request.candidates))
        n = min(len(request.candidates), self.top_k)
        head = request.candidates[:n] if windows else ()
        texts = render_passages(head, self.template, budget=self.passage_budget, tokenizer=self.tokenizer)
        return QueryState(request, texts, windows, order=list(range(n)))

    def prompt(self, query: QueryState) -> Prompt:
        """The prompt of the next window of ``query``."""
        start, end, _ = query.windows[0]
        ids = query.order[start:end]
        messages = build_messages(query.request.query.text, [query.texts[i] for i in ids], self.template, clean=False)
        docids = tuple(query.request.candidates[i].docid for i in ids)
        return Prompt(messages=tuple(messages), qid=query.request.query.qid, docids=docids)

    def _generate(self, prompts: list[Prompt]) -> list[Generation]:
        generations = self.backend.generate(prompts, self.settings)
        if len(generations) != len(prompts):
            raise RearankError(
                f"backend {getattr(self.backend, 'name', type(self.backend).__name__)!r} returned "
                f"{len(generations)} generations for {len(prompts)} prompts"
            )
        return list(generations)

    def apply(self, query: QueryState, generation: Generation) -> None:
        """Parse ``generation`` as the answer to the next window of ``query``, reorder the window, add its trace."""
        start, end, pass_index = query.windows.pop(0)
        size = end - start
        if generation.finish_reason == BACKEND_ERROR:
            permutation, status = tuple(range(size)), BACKEND_ERROR
        else:
            parsed = parse_answer(generation.text, size, hit_token_limit=generation.finish_reason == "length")
            permutation, status = parsed.permutation, parsed.status
        query.order[start:end] = apply_permutation(query.order[start:end], permutation)
        query.traces.append(WindowTrace(
            qid=query.request.query.qid, start=start, end=end, pass_index=pass_index,
            prompt_tokens=generation.prompt_tokens, completion_tokens=generation.completion_tokens,
            raw_output=generation.text, permutation=tuple(permutation), status=status,
            latency_s=generation.latency_s,
        ))
