"""``rearank rag barrag filter``: BAR-RAG's training filter (8 selector x 10 reader samples a question), resumable.

``register_barrag(rag_subparsers)`` adds ``barrag`` under the ``rag`` command group.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rearank.io.outputs import reads, writes

DESCRIPTION = """\
Keep the questions of a barrag-selector parquet folder (`rearank synth --method barrag-selector`) on which the
selector's choices make the reader succeed sometimes, not always or never (BAR-RAG's released rule): 8 selector
samples a question, each selection read 10 times at temperature 0.7; a selection's accuracy is the share of
reader answers whose generator reward is >= 0.8; keep when the accuracies are not all equal, their mean is in
[0.25, 0.85] and their variance >= 0.02. Both models are called through OpenAI-compatible servers (`vllm serve`,
`python -m rearank.backends.chat_server`) with n samples a request.

Every judged question is appended to DIR/filter_log.jsonl as it finishes: rerun the same command to resume.
When all are judged, DIR gets train.parquet (kept questions), val.parquet (copied) and filter_stats.json.
"""

EPILOG = """\
example:
  rearank rag barrag filter --data data/rl/barrag-sel --output-dir data/rl/barrag-sel-filtered \\
      --selector-url http://127.0.0.1:8001/v1 --selector-model Qwen/Qwen2.5-7B-Instruct \\
      --reader-url http://127.0.0.1:8000/v1 --reader-model Qwen/Qwen2.5-7B-Instruct
"""


def _add_filter(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("filter", help="BAR-RAG training filter over a barrag-selector parquet (resumable)",
                              description=DESCRIPTION, epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    reads(p.add_argument("--data", required=True, type=Path, metavar="DIR", help="folder with train.parquet (and val)"))
    writes(p.add_argument("--output-dir", required=True, type=Path, metavar="DIR", help="where the filtered rows go"))
    p.add_argument("--selector-url", required=True, metavar="URL", help="OpenAI-compatible base URL of the selector")
    p.add_argument("--selector-model", required=True, metavar="NAME", help="model name the selector server serves")
    p.add_argument("--reader-url", required=True, metavar="URL", help="OpenAI-compatible base URL of the reader")
    p.add_argument("--reader-model", required=True, metavar="NAME", help="model name the reader server serves")
    p.add_argument("--selector-samples", type=int, default=8, metavar="N", help="selections a question (8)")
    p.add_argument("--reader-samples", type=int, default=10, metavar="K", help="reader answers a selection (10)")
    p.add_argument("--selector-temperature", type=float, default=1.0, help="selector sampling temperature (1.0)")
    p.add_argument("--reader-temperature", type=float, default=0.7, help="reader sampling temperature (0.7)")
    p.add_argument("--questions-in-flight", type=int, default=8, metavar="N", help="questions judged at once (8)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_run_filter)


def _run_filter(args: argparse.Namespace) -> int:
    from rearank.errors import RearankError
    from rearank.rag.barrag.train_filter import FilterSettings, run_filter

    for name in ("selector_samples", "reader_samples", "questions_in_flight"):
        if getattr(args, name) < 1:
            raise RearankError(f"--{name.replace('_', '-')} must be >= 1")
    settings = FilterSettings(
        selector_url=args.selector_url, selector_model=args.selector_model, reader_url=args.reader_url,
        reader_model=args.reader_model, selector_samples=args.selector_samples, reader_samples=args.reader_samples,
        selector_temperature=args.selector_temperature, reader_temperature=args.reader_temperature,
        questions_in_flight=args.questions_in_flight,
    )
    stats = run_filter(args.data, args.output_dir, settings, progress=not args.quiet)
    print(f"judged {stats['judged']} of {stats['questions']} questions; reasons {stats['reasons']}")
    if not stats["complete"]:
        print(f"{stats['failed_this_run']} question(s) failed (selector or reader errors): rerun the same command "
              "to resume")
        return 1
    print(f"kept {stats['kept']} -> {args.output_dir / 'train.parquet'}")
    return 0


def register_barrag(rag_subparsers: argparse._SubParsersAction) -> None:
    """Add ``barrag`` (with ``filter``) under the ``rag`` command group."""
    p = rag_subparsers.add_parser("barrag", help="BAR-RAG data steps (the training filter)")
    _add_filter(p.add_subparsers(dest="barrag_command", metavar="STEP", required=True))

