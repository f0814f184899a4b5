"""Data synthesis at the Rearank paper's scale (179 queries x 50 sets of 20), timed with and without token stats.

dl21's 53 judged queries are replicated under new query ids *and* new docids until there are 179, so every
passage is distinct (as in a real 179-query set) and is rendered and tokenized on its own. Prints the time of
each stage-inclusive run and sets per second; the tokenizer load is timed apart (paid once per run).

    python bench/bench_synth.py [--queries 179] [--samples 50] [--set-size 20]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from data_synthesis.pipeline import SynthConfig, synthesize
from data_synthesis.tokens import load_tokenizer
from rearank.data.packs import load_qrels, load_requests
from rearank.types import Candidate, Query, Request


def replicate(requests: list[Request], qrels: dict, n_queries: int) -> tuple[list[Request], dict]:
    """``n_queries`` judged requests made of copies of ``requests`` with fresh qids and docids."""
    judged = [r for r in requests if qrels.get(r.query.qid)]
    out_requests, out_qrels = [], {}
    for i in range(n_queries):
        copy, source = divmod(i, len(judged))
        request = judged[source]
        qid = f"{request.query.qid}-r{copy}"
        out_requests.append(Request(Query(qid, request.query.text), tuple(
            Candidate(f"{c.docid}-r{copy}", c.score, c.text, c.title) for c in request.candidates)))
        out_qrels[qid] = {f"{docid}-r{copy}": rel for docid, rel in qrels[request.query.qid].items()}
    return out_requests, out_qrels


def timed(requests, qrels, config, tokenizer, name) -> tuple[float, float, dict]:
    """Wall and CPU seconds (all threads of this process) of one synthesis, and its stats."""
    with tempfile.TemporaryDirectory() as out:
        wall, cpu = time.perf_counter(), time.process_time()
        stats = synthesize(requests, qrels, out, config, tokenizer=tokenizer, tokenizer_name=name, progress=False)
        return time.perf_counter() - wall, time.process_time() - cpu, stats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=179)
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--set-size", type=int, default=20)
    parser.add_argument("--tokenizer", default="embedded")
    args = parser.parse_args()

    os.environ.setdefault("REARANK_DATA", str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    requests, qrels = replicate(load_requests(dataset="dl21"), load_qrels("dl21"), args.queries)
    config = SynthConfig(samples_per_query=args.samples, set_size=args.set_size, data_source="rearank/bench")
    n_passages = len({c.docid for r in requests for c in r.candidates})
    print(f"input: {len(requests)} queries (dl21 replicated), {n_passages} distinct passages, "
          f"{args.samples} sets of {args.set_size} per query; {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f} (other processes slow the wall times)")

    start = time.perf_counter()
    tokenizer = load_tokenizer(args.tokenizer)
    print(f"tokenizer load ({args.tokenizer}): {time.perf_counter() - start:.1f} s (once per run, not below)")

    for label, tok in (("without token stats (--tokenizer none)", None), ("with token stats", tokenizer)):
        elapsed, cpu, stats = timed(requests, qrels, config, tok, args.tokenizer if tok else "none")
        drawn, kept = stats["sampling"]["sets_drawn"], stats["filters"]["kept"]
        line = (f"{label}: {elapsed:.1f} s wall ({cpu:.1f} s CPU) for {drawn} drawn / {kept} kept sets = "
                f"{drawn / elapsed:.0f} drawn sets/s, {kept / elapsed:.0f} written sets/s")
        tokens = stats["prompt_tokens"]
        if tokens:
            line += (f"; prompt tokens mean {tokens['all']['mean']}, max {tokens['all']['max']}, "
                     f"count error {tokens['check']['max_abs_error']} on {tokens['check']['sets']} checked sets")
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
