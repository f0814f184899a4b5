"""``rearank synth --method NAME`` for a card that reads QA files (``barrag-selector``, ``barrag-generator``,
``arena``, a plugin's): QA files -> verl RL rows (see qa_rows)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rearank.errors import MissingDataError, RearankError
from rearank.io.outputs import reads
from rearank.methods.card import Card
from rearank.rag.config import add_retrieval_arguments, retrieval_settings


def add_qa_arguments(parser: argparse.ArgumentParser) -> None:
    """The QA inputs of the methods whose rows come from QA files."""
    qa = parser.add_argument_group("QA input (--method barrag-selector | barrag-generator | arena | a plugin's)")
    reads(qa.add_argument("--qa", action="append", metavar="FILE", default=[],
                          help="QA file: HotpotQA/2Wiki JSON, MuSiQue JSONL, DPR ctxs or FlashRAG JSONL (repeatable)"))
    qa.add_argument("--qa-format", default="auto", help="auto (sniffed), hotpotqa, 2wiki, musique, dpr, flashrag")
    qa.add_argument("--qa-limit", type=int, metavar="N", help="first N questions of each file")
    reads(qa.add_argument("--evidence", metavar="FILE",
                          help="barrag-generator: JSONL {qid, pids} of a selector's choices (default: BM25 top 5)"))
    add_retrieval_arguments(parser)


def run_qa(args: argparse.Namespace, method: Card) -> int:
    """Load the QA files, build the rows of ``method`` and write them; print counts."""
    from data_synthesis.qa_rows import QARowsConfig, load_evidence, qa_rows, write_qa_outputs
    from data_synthesis.tokens import load_tokenizer
    from rearank.io.qa import load_qa

    if not args.qa:
        raise RearankError(f"--method {method.name} reads QA files: give --qa FILE (e.g. "
                           "../shared/data/qa/hotpotqa/train_distractor.sample100.json)")
    for path in [*args.qa, *([args.evidence] if args.evidence else [])]:
        if not Path(path).is_file():
            raise MissingDataError(f"file not found: {path}")
    if args.evidence and not method.evidence:
        raise RearankError(f"--evidence is for a generator that reads a selector's choices, not --method {method.name}")
    retrieval = retrieval_settings(args)
    started = time.perf_counter()
    items = [item for path in args.qa for item in load_qa(path, args.qa_format, args.qa_limit)]
    items, run, _ = retrieval.retrieve(items, progress=not args.quiet)
    config = QARowsConfig(method=method.name, val_fraction=args.val_fraction, seed=args.seed,
                          data_source=args.data_source or "", max_passage_tokens=args.passage_budget or None)
    tokenizer = load_tokenizer(args.tokenizer)
    rows, skipped = qa_rows(items, config, load_evidence(args.evidence) if args.evidence else None, tokenizer, run)
    stats = write_qa_outputs(rows, skipped, args.output_dir, config, args.qa, tokenizer, args.tokenizer)
    lines = [f"questions: {stats['questions']} in, rows: train {stats['rows']['train']} / val {stats['rows']['val']}"
             + (f", skipped: {stats['skipped']}" if skipped else "")]
    if "prompt_tokens" in stats:
        t = stats["prompt_tokens"]
        lines.append(f"prompt tokens: mean {t['mean']}, p95 {t['p95']:.0f}, max {t['max']} -> verl "
                     f"data.max_prompt_length={t['recommended_max_prompt_length']}")
    lines.append(f"wrote {', '.join(stats['outputs'])} to {args.output_dir} in {time.perf_counter() - started:.1f}s")
    print("\n".join(lines))
    return 0
