"""A method's card: the whole method, declared once in the method's folder.

A card names the method and its kind (``rank``: the engine reranks with it; ``reader``: a RAG answer format a
reader writes; ``selector``: a RAG answer format that picks passages), a ranking card's ``Method`` class, presets
and default backend, its prompt templates (YAML files in its folder, each name registered in
:data:`rearank.methods.templates.TEMPLATES`), and the pieces that training, inference, synthesis and the recipe
checks share: renderer, parser, answer grammar, verl reward, oracle answer, example completions, synthesis rows
and the paper's figures a run is printed beside. :data:`CARDS` is the one registry of methods
(:data:`rearank.methods.METHODS` is the view of its ranking cards' classes); consumers loop over it instead of
switching on names.

rearank's cards are named here and loaded on first use; another package adds its own through the entry-point
group ``rearank.cards`` (a :class:`Card`)::

    [project.entry-points."rearank.cards"]
    toy-sort = "toy_plugin.method:CARD"
    toy-reader = "toy_plugin.card:CARD"
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Any, NamedTuple

from rearank.errors import RearankError
from rearank.plugins import Registry

#: Card kinds.
RANK, READER, SELECTOR = "rank", "reader", "selector"
KINDS = (RANK, READER, SELECTOR)
#: What ``rearank synth --method NAME`` reads for a card: sampled sets of judged queries, teacher lists, QA files.
SYNTH_INPUTS = ("sets", "teacher", "qa")


def _no_fixed_score(kind: str, truth: dict) -> float | None:
    return None


@dataclass(frozen=True)
class Examples:
    """Completions of known kinds for one row of the method's training data: ``make(decoded ground truth)`` ->
    ``{kind: completion}``; ``expected(kind, truth)``: the score the reward's definition gives that kind (None: no
    fixed value); ``best``: the kind that must get a positive GRPO advantage."""

    make: Callable[[dict], dict[str, str]]
    best: str
    expected: Callable[[str, dict], float | None] = _no_fixed_score


@dataclass(frozen=True)
class TemplateSets:
    """A ranking card whose sampled sets ``rearank synth`` writes with a ranking template (``--template``, default
    its method's ``template`` option): each set's prompt is the template's chat over the set's passages (each
    passage rendered once for all its sets, prompt tokens counted fast), and ``sft(labels, top grade, reasoning)``
    the assistant message of its direct-SFT row (``reasoning``: the template's)."""

    sft: Callable[[Sequence[int], int, bool], dict[str, str]]


@dataclass(frozen=True)
class Reading:
    """How ``rag eval`` reads a reader card that sees a fixed number of passages once, instead of the top-k of each
    ``--k``, and scores it by measures of its own (ARENA): ``shown(item)``, how many of the selector's order it
    reads; ``score(item, shown passages, response, style)``, the record of one reading (``answer`` and the
    measures); ``measures``, their names in table order; ``style``, the answer normalisation its paper scores with."""

    shown: Callable[[Any], int]
    score: Callable[..., dict]
    measures: tuple[str, ...]
    style: str = "squad"


class PublishedRow(NamedTuple):
    """One system's figures in a paper's table: ``source``, the QA set as ``rag eval`` names a question's source
    (None: a figure over several sets, printed beside every run); ``k``, the passages the paper's reader read (None:
    a reading card's fixed count); ``values``, one per measure of its :class:`Published`."""

    system: str
    source: str | None
    k: int | None
    values: tuple[float, ...]


@dataclass(frozen=True)
class Published:
    """The figures a paper published for a method, which ``rag eval`` prints under its table beside ours.

    ``paper``: the paper and its table; ``measures``: what each row's values are, by ``rag eval``'s measure names
    (``em``, ``f1``, ``judge``, ...); ``scale``: the factor that makes a value a percentage (1: the paper prints
    percentages; 100: fractions); ``rows`` (:class:`PublishedRow`) print in their order, those of the run's sets;
    ``label``: a row's first cell, formatted with ``paper``, ``system`` and ``source``; ``notes``: what follows a
    measure's value (the judge model); ``citation``: the paper cited in full (authors, title, arXiv id, table),
    printed under the rows."""

    paper: str
    measures: tuple[str, ...]
    rows: tuple[PublishedRow, ...]
    label: str = "{paper}, {source}: {system}"
    scale: float = 1
    notes: Mapping[str, str] = field(default_factory=dict)
    citation: str = ""

    def __post_init__(self) -> None:
        for row in self.rows:
            if len(row.values) != len(self.measures):
                raise RearankError(f"{self.paper}, {row.system}: {len(row.values)} values for the "
                                   f"{len(self.measures)} measures {', '.join(self.measures)}")


class Figure(NamedTuple):
    """One published nDCG@10 x 100 of a checkpoint: ``dataset``, a dataset pack's name or a benchmark suite's
    (``bright``: the mean over its datasets, as papers print it); ``low`` and ``high``, equal for a single figure,
    the ends of a reference band as published (RankLLM's reproduction ranges)."""

    dataset: str
    low: float
    high: float


@dataclass(frozen=True)
class Checkpoint:
    """A released checkpoint's published figures, which ``rearank benchmark --expect published`` checks a finished
    suite of it against.

    ``name``: how papers and tables name it; ``model``: its hub id (a suite whose recorded model is this id, or a
    folder of this name, is matched to it); ``citation``: where the figures are published, cited in full (authors,
    title, arXiv id, table); ``first_stage``: what the
    figures rerank (None: the dataset packs' BM25 top 100, the suite's default; else the run to pass as
    ``--first-stage``); ``figures`` (:class:`Figure`), in the order they print."""

    name: str
    model: str
    citation: str
    figures: tuple[Figure, ...]
    first_stage: str | None = None

    def __post_init__(self) -> None:
        for figure in self.figures:
            if not figure.low <= figure.high:
                raise RearankError(f"{self.name}, {figure.dataset}: band {figure.low}-{figure.high} has its ends "
                                   "reversed")


def figures(values: Mapping[str, float | tuple[float, float]]) -> tuple[Figure, ...]:
    """:class:`Figure` s from ``{dataset: value}`` (a single figure) or ``{dataset: (low, high)}`` (a band)."""
    return tuple(Figure(name, *(value if isinstance(value, tuple) else (value, value)))
                 for name, value in values.items())


@dataclass(frozen=True)
class QARow:
    """What a card's ``rows`` builds one question's training row from: the item, its first stage (``[(passage,
    score)]``, best first; empty unless the card reads it), a selector's chosen pids (None: none given), and the
    passage budget and tokenizer inference cuts passages with."""

    item: Any
    ranked: Sequence[tuple[Any, float]] = ()
    evidence: Sequence[str] | None = None
    max_passage_tokens: int | str | None = None
    tokenizer: Any = None

    @property
    def cut(self) -> dict[str, Any]:
        """The keywords of the prompt renderers that cut passages."""
        return {"max_passage_tokens": self.max_passage_tokens, "tokenizer": self.tokenizer}


@dataclass(frozen=True)
class Card:
    """One method, declared.

    ``method``: a ``rank`` card's :class:`~rearank.methods.base.Method` class, named as the card (``METHODS[name]``;
    None: a training format another method's class runs, as ReasonRank's); ``presets``: its named settings (preset
    name -> ``rearank rerank`` settings that ``--preset NAME`` gives the flags left at their defaults);
    ``backend``: the backend ``rearank rerank --method NAME`` runs without ``--backend`` (None: ``hf``).
    ``templates``: template name -> YAML file in ``folder`` (a ``reader``/``selector`` card's first template is
    its default). ``placeholders``: for a ``reader``/``selector`` card,
    the ``str.format`` fields its RAG prompt files (``answer_format: <card name>``) may use in ``system``/``user``
    and in ``passage``. ``render(prompt_file, question, passages)``: a reader's chat over passages whose texts are
    cut already. ``parse(response)``: a reader's short answer. ``grammar(n_passages)``: the answer grammar a
    constraining backend follows (None: none). ``reward``: verl's ``custom_reward_function`` (``pkg://`` path,
    function name). ``oracle``: the ideal answer in the method's format (``rank``: ``(labels, top_grade)``;
    ``reader``/``selector``: ``(gold answer, 1-based ids of the shown supporting passages)``). ``examples``: the
    recipe checks' completions. ``synth``: what ``rearank synth --method NAME`` reads (:data:`SYNTH_INPUTS`; None:
    no synthesis); for ``sets``, ``template_sets``: the sets are written with a ranking template
    (:class:`TemplateSets`; None: each set is one request to ``method``, whose one task is its prompt and whose
    ``answer_text`` its direct-SFT target); ``rows(QARow)``: for ``qa``, one question's row -- ``(messages, ground
    truth, shown pids)`` or the reason it is skipped; ``first_stage``: its rows read the question's first-stage
    ranking; ``evidence``: they read a selector's choices (``--evidence``); ``ability``: the rows' ``ability``
    column. ``reading``: how ``rag eval`` reads and scores it when not by each ``--k`` (:class:`Reading`; None: by
    each ``--k``, EM/F1/Hit). ``published``: the paper's figures ``rag eval`` prints beside a run of it
    (:class:`Published`; None: none). ``checkpoints``: the released checkpoints of the method whose published
    nDCG@10 figures ``rearank benchmark --expect published`` checks a suite against (:class:`Checkpoint`).
    """

    name: str
    kind: str
    folder: Path
    method: type | None = None
    presets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    backend: str | None = None
    templates: Mapping[str, str] = field(default_factory=dict)
    placeholders: tuple[frozenset[str], frozenset[str]] | None = None
    render: Callable[..., list] | None = None
    parse: Callable[[str], str] | None = None
    grammar: Callable[[int], Any] | None = None
    reward: tuple[str, str] | None = None
    oracle: Callable[..., str] | None = None
    examples: Examples | None = None
    synth: str | None = None
    template_sets: TemplateSets | None = None
    rows: Callable[[QARow], Any] | None = None
    first_stage: bool = False
    evidence: bool = False
    ability: str = ""
    reading: Reading | None = None
    published: Published | None = None
    checkpoints: tuple[Checkpoint, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise RearankError(f"card {self.name!r}: kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.synth is not None and self.synth not in SYNTH_INPUTS:
            raise RearankError(f"card {self.name!r}: synth must be one of {', '.join(SYNTH_INPUTS)}, "
                               f"got {self.synth!r}")
        if self.synth == "qa" and self.rows is None:
            raise RearankError(f"card {self.name!r}: synth 'qa' needs a rows builder")
        if self.synth == "sets" and self.method is None:
            raise RearankError(f"card {self.name!r}: synth 'sets' needs a method")
        if self.template_sets is not None and self.synth != "sets":
            raise RearankError(f"card {self.name!r}: template sets go with synth 'sets'")
        if self.kind != RANK and (self.placeholders is None or self.render is None or self.parse is None):
            raise RearankError(f"card {self.name!r}: a {self.kind} card declares placeholders, render and parse")
        if self.kind != RANK and (self.method or self.presets or self.backend or self.template_sets):
            raise RearankError(f"card {self.name!r}: a {self.kind} card has no method, presets, backend or "
                               "template sets")
        if self.method is not None and getattr(self.method, "name", None) != self.name:
            raise RearankError(f"card {self.name!r}: its method {self.method.__name__} is named "
                               f"{getattr(self.method, 'name', None)!r}")

    def template_files(self) -> dict[str, Path]:
        """Template name -> its file."""
        return {name: Path(self.folder) / file for name, file in self.templates.items()}


def _builtin(spec: str) -> Callable[[], Card]:
    """A loader of ``module:attribute`` (a module of a method folder, imported on first use)."""
    module, attribute = spec.split(":")
    return lambda: getattr(import_module(module), attribute)


#: rearank's cards, one per method folder (reasonrank's reward and rows sit beside listwise).
_BUILTINS = {
    "listwise": "rearank.methods.listwise.card:LISTWISE",
    "reasonrank": "rearank.methods.listwise.card:REASONRANK",
    "groupwise": "rearank.methods.groupwise.card:CARD",
    "pointwise": "rearank.methods.pointwise.card:CARD",
    "plain": "rearank.methods.plain.card:CARD",
    "barrag-selector": "rearank.methods.barrag.card:SELECTOR",
    "barrag-generator": "rearank.methods.barrag.card:GENERATOR",
    "arena": "rearank.methods.arena.card:CARD",
}


class CardRegistry(Registry):
    """:class:`~rearank.plugins.Registry` of :class:`Card`: an entry point's object must be a card of its name."""

    def __getitem__(self, name: str) -> Card:
        card = super().__getitem__(name)
        if not isinstance(card, Card) or card.name != name:
            raise RearankError(f"the rearank.cards entry point {name!r} gave {card!r}, not a Card named {name!r}")
        return card


CARDS = CardRegistry("rearank.cards", "method card", {name: _builtin(spec) for name, spec in _BUILTINS.items()})


def cards(kind: str | None = None) -> list[Card]:
    """Every card that loads (of ``kind``, if given), in registry order; a card that fails to load is left out
    with a warning naming its entry point."""
    found = []
    for name in CARDS:
        try:
            card = CARDS[name]
        except RearankError as err:
            warnings.warn(str(err), stacklevel=2)
            continue
        if kind is None or card.kind == kind:
            found.append(card)
    return found


def card(name: str) -> Card:
    """The card ``name``, else a one-line :class:`RearankError` listing the cards."""
    return CARDS.get_or_raise(name)
