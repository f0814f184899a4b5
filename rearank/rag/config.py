"""The typed configuration of ``rearank rag eval`` (:class:`RagConfig`) and of open retrieval
(:class:`RetrievalSettings`, also used by the RAG modes of ``rearank synth``).

The command line reads its flags into these once (:mod:`rearank.cli.rag`; the open-retrieval flags of ``rag eval``
and of the RAG modes of ``rearank synth`` are declared here, :func:`add_retrieval_arguments`) and hands them on, not the argparse namespace. Every setting is checked when built, before a question, corpus or
model loads; :meth:`RagConfig.record` is what the run folder's ``config.json`` holds, and a resume must match it
(:meth:`RagConfig.check_resume`, then :class:`rearank.rag.evaluate.RagEvaluation` with the corpus fingerprint).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rearank.errors import RearankError
from rearank.io.outputs import reads
from rearank.measures.answers import SQUAD, Style

if TYPE_CHECKING:
    from rearank.methods.card import Card

#: The ``--format`` values of a QA file.
QA_FORMATS = ("auto", "hotpotqa", "2wiki", "musique", "dpr", "flashrag")
#: The card whose published figures a run's table prints when neither its reader's card nor its selector's card
#: has any (the default run: ``--selector none``, a ``plain`` reader): RRPO's Table 1 on the ``pointwise`` card,
#: readers over BM25's, a reranker's and an RRPO-trained reranker's top k, the per-k setting ``rag eval`` follows.
DEFAULT_PUBLISHED = "pointwise"
#: The keys open retrieval adds to the record (the corpus fingerprint is known once the corpus is read).
RETRIEVAL_KEYS = ("corpus", "corpus_fingerprint", "depth", "candidates")


def styles() -> dict[str, Style]:
    """The ``--style`` values, name -> answer normalisation: SQuAD's, then each one a reader card's reading declares
    (``arena``)."""
    from rearank.methods.card import READER, cards

    declared = [c.reading.style for c in cards(READER) if c.reading is not None]
    return {str(SQUAD): SQUAD, **{str(style): style for style in declared if isinstance(style, Style)}}


@dataclass(frozen=True)
class RetrievalSettings:
    """Open retrieval: without ``corpus`` each question keeps the paragraphs its file gives it; with it, its
    candidates are the BM25 (or ``candidates`` run) top ``depth`` of the corpus."""

    corpus: str | None = None
    depth: int = 100
    candidates: Path | None = None

    def __post_init__(self) -> None:
        if self.depth < 1:
            raise RearankError(f"--depth must be at least 1, got {self.depth}")
        if self.candidates is not None and self.corpus is None:
            raise RearankError("--candidates needs --corpus (the run's passages are read from it)")

    def retrieve(self, items: list, progress: bool) -> tuple[list, dict | None, dict[str, Any]]:
        """The items with open-retrieval candidates (and the first-stage run, and the record's retrieval keys)
        when a corpus is given; the items unchanged, no run and no keys otherwise."""
        if self.corpus is None:
            return items, None, {}
        from rearank.io.trec import read_run
        from rearank.rag.retrieval import Corpus, retrieve

        corpus = Corpus(self.corpus, progress=progress)
        run = read_run(self.candidates) if self.candidates is not None else None
        items, run = retrieve(items, corpus, self.depth, run=run, progress=progress)
        record = {"corpus": self.corpus, "corpus_fingerprint": corpus.fingerprint, "depth": self.depth,
                  "candidates": str(self.candidates.resolve()) if self.candidates else None}
        return items, run, record


def add_retrieval_arguments(parser: argparse.ArgumentParser) -> None:
    """``--corpus``, ``--depth``, ``--candidates``: open retrieval (``rag eval`` and the RAG modes of ``synth``)."""
    g = parser.add_argument_group(
        "open retrieval", "Without --corpus each question's candidates are the paragraphs its file gives it. With "
        "--corpus they are the BM25 top --depth of the whole corpus (Lucene, BEIR flat settings), gold paragraphs "
        "matched to corpus passages so supporting recall still counts them.")
    reads(g.add_argument("--corpus", metavar="CORPUS",
                         help="BEIR corpus.jsonl, DPR psgs_w100.tsv, a Lucene index folder with stored documents, or a "
                         "Pyserini prebuilt index name such as wikipedia-dpr-100w (downloaded on first use)"))
    g.add_argument("--depth", type=int, default=100, metavar="N", help="candidates per question (default 100)")
    reads(g.add_argument("--candidates", type=Path, metavar="RUN",
                         help="a TREC run over the corpus ids (any first stage: dense, hybrid) instead of BM25"))


def retrieval_settings(args: argparse.Namespace) -> RetrievalSettings:
    """The open-retrieval settings of the parsed flags (checked)."""
    return RetrievalSettings(corpus=args.corpus, depth=args.depth, candidates=args.candidates)


def parse_ks(text: str) -> tuple[int, ...]:
    """The ``--k`` values (``"1,3,5"``), sorted and unique; an error names what is wrong."""
    try:
        ks = sorted({int(k) for k in text.split(",") if k.strip()})
    except ValueError:
        raise RearankError(f"--k {text!r}: expected comma-separated integers such as 1,3,5") from None
    if not ks or ks[0] < 1:
        raise RearankError(f"--k {text!r}: every k must be at least 1")
    return tuple(ks)


@dataclass(frozen=True)
class RagConfig:
    """Every setting of a ``rag eval`` run: the QA ``data`` (its ``format``, the first ``limit`` questions),
    ``retrieval``, the ``selector``, the ``reader`` (model, options, prompt ``template``, answer budget, prompts per
    call, response cache), an optional LLM ``judge``, the ``ks`` read and the answer ``style``, and the output
    folder (``label``, ``resume``, ``progress``)."""

    data: Path
    output_dir: Path
    format: str = "auto"
    limit: int | None = None
    retrieval: RetrievalSettings = field(default_factory=RetrievalSettings)
    selector: str = "none"
    selector_options: Mapping[str, Any] = field(default_factory=dict)
    reader: str = "gold"
    reader_model: str | None = None
    reader_options: Mapping[str, Any] = field(default_factory=dict)
    template: str = "plain"
    max_new_tokens: int = 32
    batch_size: int = 32
    reader_cache: Path | None = None
    judge: str | None = None
    judge_backend: str = "openai"
    judge_options: Mapping[str, Any] = field(default_factory=dict)
    ks: Sequence[int] = (1, 3, 5)
    style: str = "squad"
    label: str | None = None
    resume: bool = False
    progress: bool = True

    def __post_init__(self) -> None:
        from rearank.rag.readers import RULE_READERS, reader_names
        from rearank.rag.selectors import selector_names

        if self.format not in QA_FORMATS:
            raise RearankError(f"--format {self.format!r}: choose one of {', '.join(QA_FORMATS)}")
        if self.limit is not None and self.limit < 1:
            raise RearankError(f"--limit must be at least 1, got {self.limit}")
        if not self.ks or min(self.ks) < 1:
            raise RearankError(f"--k {','.join(map(str, self.ks))!r}: every k must be at least 1")
        known = styles()
        if self.style not in known:
            raise RearankError(f"--style {self.style!r}: choose one of {', '.join(known)}")
        object.__setattr__(self, "style", known[self.style])  # the name read as its normalisation
        name = self.selector.partition(":")[0]
        if name not in selector_names():
            raise RearankError(f"--selector {self.selector!r}: unknown selector {name!r}; choose one of "
                               f"{', '.join(selector_names())} (as NAME or NAME:ARG)")
        readers = reader_names()
        if self.reader not in readers:
            raise RearankError(f"--reader {self.reader!r}: choose one of {', '.join(readers)}")
        if self.batch_size < 1:
            raise RearankError(f"--batch-size must be at least 1, got {self.batch_size}")
        from rearank.rag.readers import reader_card

        reader_card(self.template)  # a template that is no reader's prompt fails here
        if self.rule_reader:
            if self.reader_model:
                raise RearankError(f"the {self.reader} reader takes no --reader-model")
        elif self.max_new_tokens < 1:
            raise RearankError(f"--max-new-tokens must be at least 1, got {self.max_new_tokens}")
        if self.judge and self.judge_backend not in readers[len(RULE_READERS):]:
            raise RearankError(f"--judge-backend {self.judge_backend!r}: choose one of "
                               f"{', '.join(readers[len(RULE_READERS):])}")

    @property
    def rule_reader(self) -> bool:
        """Whether the reader is a rule (oracle) reader rather than an LLM on a backend."""
        from rearank.rag.readers import RULE_READERS

        return self.reader in RULE_READERS

    @property
    def reading(self) -> Card | None:
        """The template's reader card when it reads its passages once and scores them its own way (ARENA), else
        None."""
        from rearank.rag.readers import reader_card

        card = reader_card(self.template)
        return card if card.reading is not None else None

    @property
    def run_label(self) -> str:
        """The run's name in the table: ``label``, or the selector and the reader."""
        return self.label or f"{self.selector} / {self.reader}" + (f":{self.reader_model}" if self.reader_model
                                                                    else "")

    @property
    def reader_cache_path(self) -> Path:
        """The reader's response cache: ``reader_cache``, or ``reader_cache.jsonl`` in the output folder."""
        return self.reader_cache or self.output_dir / "reader_cache.jsonl"

    def record(self, retrieval: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The settings as ``config.json`` records them, with the ``retrieval`` keys of
        :meth:`RetrievalSettings.retrieve`; a reading card's run (ARENA) records ``k`` as the card's name and ``style``
        as its normalisation (``arena``)."""
        record: dict[str, Any] = {
            "data": str(Path(self.data).resolve()), "format": self.format, "limit": self.limit,
            "selector": self.selector, "selector_options": dict(self.selector_options), "reader": self.reader,
            "reader_model": self.reader_model, "reader_options": dict(self.reader_options),
            "template": self.template, "max_new_tokens": self.max_new_tokens, "k": list(self.ks),
            "style": self.style, "label": self.run_label}
        if self.judge:
            record["judge"] = {"model": self.judge, "backend": self.judge_backend, "options": dict(self.judge_options)}
        record.update(retrieval or {})
        reading = self.reading
        if reading is not None:
            record["k"], record["style"] = reading.name, reading.reading.style
        return record

    def check_resume(self) -> None:
        """On ``--resume``, refuse an output folder whose ``config.json`` records other settings (but the
        retrieval ones, checked once the corpus is read), naming them; nothing to check otherwise."""
        path = self.output_dir / "config.json"
        if not self.resume or not path.is_file():
            return
        try:
            before = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise RearankError(f"{path}: unreadable run record ({err}); use a new --output-dir") from None
        now = self.record()
        changed = sorted(key for key in set(before) | set(now) if key not in RETRIEVAL_KEYS
                         and before.get(key) != now.get(key))
        if changed:
            raise RearankError(f"{self.output_dir} was made with other settings ({', '.join(changed)}); "
                               "use a new --output-dir or the same settings")
