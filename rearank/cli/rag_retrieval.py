"""The open-retrieval flags (``--corpus``, ``--depth``, ``--candidates``) of ``rag eval`` and of the RAG modes of
``rearank synth``, read into :class:`rearank.rag.config.RetrievalSettings`."""

from __future__ import annotations

import argparse
from pathlib import Path

from rearank.io.outputs import reads
from rearank.rag.config import RetrievalSettings


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
