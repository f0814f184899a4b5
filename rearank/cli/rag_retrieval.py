"""The open-retrieval flags (``--corpus``, ``--depth``, ``--candidates``) of ``rag eval`` and of the RAG modes of
``rearank synth``, and what they do to the loaded questions (:func:`rearank.rag.retrieval.retrieve`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rearank.errors import RearankError
from rearank.io.outputs import reads


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


def retrieval_items(args: argparse.Namespace, items: list, progress: bool) -> tuple[list, dict | None, dict]:
    """The items with open-retrieval candidates when ``--corpus`` is given (and the first-stage run, and what
    goes into the run's config); the items unchanged otherwise."""
    from rearank.io.trec import read_run
    from rearank.rag.retrieval import Corpus, retrieve

    if args.corpus is None:
        if args.candidates is not None:
            raise RearankError("--candidates needs --corpus (the run's passages are read from it)")
        return items, None, {}
    if args.depth < 1:
        raise RearankError(f"--depth must be at least 1, got {args.depth}")
    corpus = Corpus(args.corpus, progress=progress)
    run = read_run(args.candidates) if args.candidates is not None else None
    items, run = retrieve(items, corpus, args.depth, run=run, progress=progress)
    config = {"corpus": args.corpus, "corpus_fingerprint": corpus.fingerprint, "depth": args.depth,
              "candidates": str(args.candidates.resolve()) if args.candidates else None}
    return items, run, config
