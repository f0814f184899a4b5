"""A ranking card's sampled sets as prompts, the way its card declares (``rearank synth --method NAME``).

:class:`TemplatePrompts`, for a card with :class:`~rearank.methods.card.TemplateSets` (listwise, groupwise): each
set is the ranking template's chat over its passages, every distinct passage rendered once, prompt tokens counted
fast (:mod:`.tokens`) and recounted exactly on a sample. :class:`MethodPrompts`, for any other ranking card (a
plugin's method): each set is one request to the card's method, whose one task is the set's prompt, as ``rearank
rerank`` sends it, and whose ``answer_text`` is the direct-SFT target; its prompt tokens are counted exactly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tqdm import tqdm

from data_synthesis.filters import KeptSet
from data_synthesis.sampling import query_rng
from data_synthesis.tokens import PromptTokenCounter, prompt_tokens
from rearank.errors import RearankError
from rearank.methods import method_options, option_default
from rearank.methods.card import Card
from rearank.methods.templates import load_template, with_reasoning
from rearank.prompts import as_budget, build_messages, render_passages
from rearank.types import Candidate, Query, Request

#: Sets whose prompt length is recounted exactly to check the fast count.
TOKEN_CHECK_SETS = 64


class TemplatePrompts:
    """Sets in ``card``'s ranking template: ``--template`` (default the method's), its reasoning variant."""

    def __init__(self, card: Card, config: Any, tokenizer: Any | None) -> None:
        self.card, self.config, self.tokenizer = card, config, tokenizer
        template = config.template or option_default(card.name, "template")
        self.template = with_reasoning(load_template(template), config.reasoning)
        self.texts: dict[str, str] = {}

    @property
    def settings(self) -> dict[str, Any]:
        """What the prompts were made with, recorded in the stats' config."""
        budget = self.config.passage_budget
        return {"template": self.template.name,
                "passage_budget": str(self.template.passage_budget if budget is None else as_budget(budget))}

    def render(self, sets: Sequence[KeptSet], progress: bool) -> None:
        """Render each distinct passage of the kept sets once."""
        distinct: dict[str, Candidate] = {}
        for s in sets:
            for c in s.candidates:
                distinct.setdefault(c.docid, c)
        todo = list(distinct.values())
        chunk = 2048
        for start in tqdm(range(0, len(todo), chunk), desc="passages", unit="chunk", disable=not progress or not todo,
                          dynamic_ncols=True):
            part = todo[start: start + chunk]
            self.texts.update(zip((c.docid for c in part), render_passages(
                part, self.template, budget=self.config.passage_budget, tokenizer=self.tokenizer)))

    def messages(self, query: Query, candidates: Sequence[Candidate]) -> list[dict]:
        return build_messages(query.text, [self.texts[c.docid] for c in candidates], self.template, clean=False)

    def sft(self, labels: Sequence[int], top_grade: int) -> dict[str, str]:
        return self.card.template_sets.sft(labels, top_grade, self.template.reasoning)

    def lengths(self, kept: Mapping[str, Sequence[KeptSet]], prompts: Sequence[list[dict]], seed: int,
                progress: bool = True) -> dict[str, Any]:
        """Prompt length in tokens of every kept set (in ``kept`` order, matching ``prompts``), and its check.

        Each distinct passage is tokenized once; each query's fixed part is measured exactly on its first set; a
        seeded sample of :data:`TOKEN_CHECK_SETS` sets is recounted exactly to measure the error of the sum.
        """
        counter = PromptTokenCounter(self.tokenizer, self.template)
        docids = sorted({c.docid for sets in kept.values() for s in sets for c in s.candidates})
        passage_tokens = dict(zip(docids, counter.passage_lengths([self.texts[d] for d in docids])))
        firsts, position = [], 0
        for sets in kept.values():
            firsts.append(position)
            position += len(sets)
        exact_firsts = counter.exact([prompts[i] for i in firsts])
        lengths: list[int] = []
        bar = tqdm(total=len(prompts), desc="tokens", unit="set", disable=not progress, dynamic_ncols=True)
        for sets, exact_first in zip(kept.values(), exact_firsts):
            sums = [sum(passage_tokens[c.docid] for c in s.candidates) for s in sets]
            overhead = exact_first - sums[0]
            lengths.extend(overhead + total for total in sums)
            bar.update(len(sets))
        bar.close()
        rng = query_rng(seed, "", "token-check")
        sample = sorted(rng.choice(len(prompts), size=min(TOKEN_CHECK_SETS, len(prompts)), replace=False).tolist())
        exact = counter.exact([prompts[i] for i in sample])
        error = max((abs(e - lengths[i]) for e, i in zip(exact, sample)), default=0)
        return {"lengths": lengths, "check": {"sets": len(sample), "max_abs_error": int(error)}}


class MethodPrompts:
    """Sets as ``card``'s method prompts them: the method built with the synthesis's ``template``,
    ``passage_budget`` and ``reasoning`` where given (an option it lacks is an error) and the tokenizer."""

    def __init__(self, card: Card, config: Any, tokenizer: Any | None) -> None:
        given = {"template": config.template, "passage_budget": config.passage_budget, "reasoning": config.reasoning}
        given = {key: value for key, value in given.items() if value is not None}
        options = method_options(card.name)
        for key in given:
            if key not in options:
                raise RearankError(f"method {card.name!r} has no {key} option (its options: {', '.join(options)})")
        self.name, self.tokenizer = card.name, tokenizer
        self.method = card.method(**given, tokenizer=tokenizer)

    @property
    def settings(self) -> dict[str, Any]:
        """Nothing beyond the synthesis's own config: the method's prompts are its own."""
        return {}

    def render(self, sets: Sequence[KeptSet], progress: bool) -> None:
        """Nothing ahead: the method renders each set's passages."""

    def messages(self, query: Query, candidates: Sequence[Candidate]) -> list[dict]:
        _, tasks = self.method.start(Request(query, tuple(candidates)))
        if len(tasks) != 1:
            raise RearankError(f"method {self.name!r} makes {len(tasks)} prompts of a set of {len(candidates)} "
                               "passages; synthesis writes one prompt a set")
        return [dict(message) for message in tasks[0].prompt.messages]

    def sft(self, labels: Sequence[int], top_grade: int) -> dict[str, str]:
        return {"role": "assistant", "content": self.method.answer_text(labels, top_grade)}

    def lengths(self, kept: Mapping[str, Sequence[KeptSet]], prompts: Sequence[list[dict]], seed: int,
                progress: bool = True) -> dict[str, Any]:
        """Prompt length in tokens of every kept set, each counted exactly."""
        return {"lengths": prompt_tokens(self.tokenizer, prompts),
                "check": {"sets": len(prompts), "max_abs_error": 0}}


def set_prompts(card: Card, config: Any, tokenizer: Any | None) -> TemplatePrompts | MethodPrompts:
    """The prompts of ``card``'s sets: its template's when it declares :class:`~rearank.methods.card.TemplateSets`,
    else its method's own."""
    return (TemplatePrompts if card.template_sets is not None else MethodPrompts)(card, config, tokenizer)

