"""The support table (``docs/support.md``): which method runs on which backend with which features, read from what
the code declares, so the page cannot drift from it.

Backends declare their capabilities on their classes (:class:`rearank.backends.base.BackendBase`): how they take
work (``calls``), the methods they answer (``FOR_METHODS``), how ``--engine ray`` runs them (``RAY``), whether they
cut passages with the model's tokenizer (``MODEL_TOKENIZER``), their typed options (``OPTIONS``: the think budget
``max_think_tokens``, the reasoning switch ``enable_thinking``) and the ``constrain`` keyword they accept. Methods
are probed: each registered method, with its defaults, starts a query of 100 candidates, which shows its tasks,
how many are ready at once, and the answer grammar its prompts declare (what constrained answers and the think
budget act on). The method cards (:mod:`rearank.methods.card`) give the last table: each method's kind, templates,
answer grammar, verl reward, example completions and what ``rearank synth --method`` reads for it. rearank's own
methods, backends and cards are listed, not those other packages register.

    python -m rearank.support            # print the page
    python -m rearank.support --write    # rewrite docs/support.md
    python -m rearank.support --check    # exit 1 when docs/support.md is stale
"""

from __future__ import annotations

import argparse
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path

from rearank.backends.base import CONCURRENT, RAY_ACTORS, READER
from rearank.backends.registry import BACKENDS, role
from rearank.methods import METHODS, method_options, option_default
from rearank.methods.card import CARDS, Card
from rearank.types import Candidate, Query, Request

PAGE = Path(__file__).resolve().parents[1] / "docs" / "support.md"
#: Candidates of the query each method is probed with (the usual BM25 depth).
PROBE_DEPTH = 100


@dataclass(frozen=True)
class BackendCaps:
    """What one backend declares."""

    name: str
    in_flight: bool  # concurrent: the engine keeps windows in flight, each answer handled as it arrives
    constrain: bool  # accepts constrain=answer
    think_budget: bool  # max_think_tokens
    reasoning_switch: bool  # enable_thinking
    model_tokens: bool  # passage budgets in the model's tokens (else words)
    ray: str
    for_methods: tuple[str, ...] | None

    def runs(self, method: str) -> bool:
        """Whether it answers ``method``'s prompts."""
        return self.for_methods is None or method in self.for_methods


@dataclass(frozen=True)
class MethodCaps:
    """What one method shows when it starts a query of :data:`PROBE_DEPTH` candidates."""

    name: str
    template: str | None
    tasks: int
    ready: int
    grammar: str | None  # the answer body's kind (IdList, Pattern), None without an answer grammar
    think: tuple[str, str] | None
    options: list[str]


def backend_caps(name: str) -> BackendCaps:
    """The declared capabilities of backend ``name`` (its module is imported; no model is loaded)."""
    cls = BACKENDS[name]
    options = {o.name for o in getattr(cls, "OPTIONS", ())}
    return BackendCaps(name=name, in_flight=cls.calls == CONCURRENT,
                       constrain="constrain" in inspect.signature(cls).parameters,
                       think_budget="max_think_tokens" in options, reasoning_switch="enable_thinking" in options,
                       model_tokens=bool(cls.MODEL_TOKENIZER), ray=cls.RAY, for_methods=cls.FOR_METHODS)


def method_caps(name: str) -> MethodCaps:
    """Method ``name`` with its defaults, probed with one query of :data:`PROBE_DEPTH` candidates."""
    method = METHODS[name]()
    request = Request(Query("q", "probe query"),
                      tuple(Candidate(str(i), float(PROBE_DEPTH - i), f"passage {i}") for i in range(PROBE_DEPTH)))
    _state, ready = method.start(request)
    answer = ready[0].prompt.answer if ready else None
    options = method_options(name)
    return MethodCaps(name=name, template=option_default(name, "template") if "template" in options else None,
                      tasks=method.task_count(PROBE_DEPTH), ready=len(ready),
                      grammar=type(answer.body).__name__ if answer else None, think=answer.think if answer else None,
                      options=options)


def rerank_backend_names() -> list[str]:
    """rearank's own backends that rerank (the RAG readers left out)."""
    return [name for name in BACKENDS.builtin_names if role(name) != READER]


def cell(method: MethodCaps, backend: BackendCaps) -> str:
    """The features ``method`` has on ``backend``, or why it does not run there."""
    if not backend.runs(method.name):
        return f"no: {backend.name} answers {', '.join(backend.for_methods or ())} only"
    features = []
    if method.grammar and backend.constrain:
        features.append("constrained")
    if method.think and backend.think_budget:
        features.append("think budget")
    if backend.in_flight:
        features.append("in flight")
    features.append("Ray" if backend.ray == RAY_ACTORS else f"Ray ({backend.ray})")
    return "yes: " + ", ".join(features)


def _yes(flag: bool) -> str:
    return "yes" if flag else "—"


def card_row(card: Card) -> str:
    """A card's row of the cards table."""
    cells = [f"`{card.name}`", card.kind, ", ".join(f"`{t}`" for t in card.templates) or "—",
             _yes(card.grammar is not None), " ".join(f"`{part}`" for part in card.reward or ()) or "—",
             f"yes (best: `{card.examples.best}`)" if card.examples else "—", card.synth or "—"]
    return "| " + " | ".join(cells) + " |"


def render() -> str:
    """The page's Markdown."""
    methods = [method_caps(name) for name in METHODS.builtin_names]
    backends = [backend_caps(name) for name in rerank_backend_names()]
    out = [
        "# Support table: methods, backends, features",
        "",
        ("<!-- Generated by `python -m rearank.support --write` from what the code declares; do not edit. "
        "tests/unit/test_support.py fails when it is stale. -->"),
        "",
        ("Which reranking method runs on which backend, and with which features. Every cell comes from the code: the "
        "capabilities each backend class declares (`rearank/backends/`: `calls`, `FOR_METHODS`, `RAY`, "
        "`MODEL_TOKENIZER`, `OPTIONS`, the `constrain` keyword) and what each method of the registry "
        "(`rearank/methods/`) shows when it starts a query of "
        f"{PROBE_DEPTH} candidates with its defaults. Regenerate it with `python -m rearank.support --write`."),
        "",
        "## Methods x backends",
        "",
        "| method | " + " | ".join(f"`{b.name}`" for b in backends) + " |",
        "|---|" + "---|" * len(backends),
    ]
    for m in methods:
        out.append(f"| `{m.name}` | " + " | ".join(cell(m, b) for b in backends) + " |")
    out += [
        "",
        ("- **constrained**: `-O constrain=answer` lets the model write only the answer format the method's prompts "
        "declare, so every answer parses ([constrained answers](constrained.md))."),
        "- **think budget**: `-O max_think_tokens=N` closes the reasoning after N tokens and has the model answer.",
        ("- **in flight**: the backend takes one window a call from many threads, so the engine keeps windows of "
        "different queries in flight and handles each answer as it arrives (`-O concurrency=N|auto`); the others "
        "take batches."),
        ("- **Ray**: `--engine ray` runs it on a Ray cluster with Ray Data (an actor pool building the backend once "
        "an actor, or Ray Data LLM's vLLM replicas); answers stream back to the one engine as they arrive."),
        "",
        "## Backends",
        "",
        ("| backend | takes work | constrained answers | think budget | reasoning on/off | passage budgets in "
        "| `--engine ray` | methods |"),
        "|---|---|---|---|---|---|---|---|",
    ]
    for b in backends:
        out.append(f"| `{b.name}` | {'windows in flight' if b.in_flight else 'batches'} | {_yes(b.constrain)} "
                   f"| {_yes(b.think_budget)} | {_yes(b.reasoning_switch)} "
                   f"| {'model tokens' if b.model_tokens else 'words'} | {b.ray} "
                   f"| {', '.join(b.for_methods) if b.for_methods else 'every method'} |")
    out += [
        "",
        "## Methods",
        "",
        (f"| method | default template | model calls a query ({PROBE_DEPTH} candidates) | ready at once "
        "| answer grammar | reasoning | options |"),
        "|---|---|---|---|---|---|---|",
    ]
    for m in methods:
        grammar = {"IdList": "distinct ids", "Pattern": "pattern"}.get(m.grammar or "", m.grammar or "—")
        think = f"`{m.think[0]}…{m.think[1]}`" if m.think else "—"
        out.append(f"| `{m.name}` | {f'`{m.template}`' if m.template else '—'} | {m.tasks} | {m.ready} | {grammar} "
                   f"| {think} | {', '.join(f'`{o}`' for o in m.options)} |")
    out += [
        "",
        ("*ready at once*: the model calls a query has ready when it starts; fewer than all means its windows depend "
        "on earlier answers and run one round after another. *answer grammar*: what constrained answers enforce "
        "(none: the method's answers are not constrained). *reasoning*: the tags the think budget closes (with the "
        "default template; `-O template=rankgpt` has none)."),
        "",
        "## Method cards",
        "",
        ("Every method folder declares a card (`rearank/methods/*/card.py`); the template registry, the readers of "
         "`rag eval`, `rearank synth --method` and the recipe checks read it ([add a method](add-a-method.md))."),
        "",
        "| card | kind | templates | answer grammar | verl reward | example completions | `rearank synth` reads |",
        "|---|---|---|---|---|---|---|",
        *(card_row(CARDS[name]) for name in CARDS.builtin_names),
        "",
        ("Other packages add methods (each by its card) and backends through entry points (`rearank.cards`, "
        "`rearank.backends`; [architecture](architecture.md)); they declare the same capabilities and are not listed "
        "here."),
        "",
    ]
    return "\n".join(out)



def main(argv: list[str] | None = None) -> int:
    """Print the page, write it (``--write``) or check it is current (``--check``)."""
    parser = argparse.ArgumentParser(prog="python -m rearank.support", description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help=f"rewrite {PAGE.relative_to(PAGE.parents[1])}")
    mode.add_argument("--check", action="store_true", help="exit 1 when the page differs from what the code declares")
    args = parser.parse_args(argv)
    page = render()
    if args.check:
        current = PAGE.read_text(encoding="utf-8") if PAGE.is_file() else ""
        if current != page:
            print(f"{PAGE} is stale: run `python -m rearank.support --write`", file=sys.stderr)
            return 1
        return 0
    if args.write:
        from rearank.io.files import atomic_write

        with atomic_write(PAGE) as out:
            out.write(page)
        print(f"wrote {PAGE}")
        return 0
    sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
