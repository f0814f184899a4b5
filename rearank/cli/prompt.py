"""``rearank prompt``: check stored training prompts against a template, or show a rendered window."""

from __future__ import annotations

import argparse
import sys

from rearank.errors import RearankError
from rearank.io.outputs import reads
from rearank.methods.templates import RANKING, names

DESCRIPTION = """\
check: re-render every row of a verl parquet (or chat JSONL) with a template and report "identical" or the
first difference (row, message, character offset, both snippets). Each row needs its chat messages ('prompt'
or 'messages') and what they were rendered from: 'query' or a 'qid', and 'passages' or 'docids' (at the top
level or in 'extra_info'); ids are looked up in --dataset. This is how to evaluate a published checkpoint with
the exact prompt it was trained on: write the template YAML from the paper, check it against the checkpoint's
training data, then `rearank rerank --template that.yaml`.

show: print the messages of one window of a dataset query as the template renders them.
"""

EPILOG = """\
examples:
  rearank prompt check --template rearank --data data/rl/dl21/train.parquet --dataset dl21
  rearank prompt check --template paper.yaml --data published/train.parquet --dataset dl21,dl22,dl23
  rearank prompt show --template rankgpt --dataset dl19 --query 1037798
  rearank prompt show --template rearank --dataset beir-scifact --query 1 --window 5
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``prompt`` subcommand with ``check`` and ``show``."""
    parser = subparsers.add_parser("prompt", help="check stored prompts against a template; show a rendered window",
                                   description=DESCRIPTION, epilog=EPILOG,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    templates = f"ranking template ({', '.join(names(RANKING))}) or a YAML file"
    check = sub.add_parser("check", help="re-render every row and report the first difference")
    reads(check.add_argument("--template", required=True, help=templates))
    reads(check.add_argument("--data", required=True, help="verl parquet or chat JSONL with the stored prompts"))
    check.add_argument("--dataset", help="pack(s) that resolve qids and docids, comma-separated (e.g. dl21)")
    check.add_argument("--passage-budget", help="override the template's budget (400c, 300w, 300t, none)")
    check.set_defaults(func=run_check)

    show = sub.add_parser("show", help="print the messages of one window of a dataset query")
    reads(show.add_argument("--template", required=True, help=templates))
    show.add_argument("--dataset", required=True, help="dataset pack, e.g. dl19")
    show.add_argument("--query", required=True, help="query id (or its 1-based position in the run)")
    show.add_argument("--window", type=int, default=20, help="passages in the window (20)")
    show.add_argument("--start", type=int, default=0, help="first-stage rank where the window starts (0)")
    show.add_argument("--passage-budget", help="override the template's budget (400c, 300w, 300t, none)")
    show.set_defaults(func=run_show)


def _budget(value: str | None) -> str | None:
    from rearank.methods.base import check_budget

    check_budget(value)
    return value


def run_check(args: argparse.Namespace) -> int:
    """Print ``identical: N rows`` (exit 0) or the first difference (exit 1)."""
    from rearank.methods.templates import load_template
    from rearank.prompts.check import Lookup, check_rows, read_rows

    template = load_template(args.template)
    datasets = [d.strip() for d in args.dataset.split(",")] if args.dataset else []
    rows = list(read_rows(args.data))
    count, diff = check_rows(rows, template, Lookup(datasets), budget=_budget(args.passage_budget))
    if diff is None:
        print(f"identical: {count} rows of {args.data} match template {template.name}")
        return 0
    print(f"different after {count} identical rows: {diff}")
    return 1


def run_show(args: argparse.Namespace) -> int:
    """Print the rendered messages of one window, with their roles and lengths."""
    from rearank.data.packs import load_requests
    from rearank.methods.templates import load_template
    from rearank.prompts import build_messages

    template = load_template(args.template)
    budget = _budget(args.passage_budget)
    if args.window < 1 or args.start < 0:
        raise RearankError("--window must be at least 1 and --start at least 0")
    requests = load_requests(dataset=args.dataset, top_k=args.start + args.window)
    by_qid = {r.query.qid: r for r in requests}
    request = by_qid.get(args.query)
    if request is None and args.query.isdigit() and 1 <= int(args.query) <= len(requests):
        request = requests[int(args.query) - 1]
    if request is None:
        raise RearankError(f"query {args.query!r} is not in {args.dataset} (give a qid, or 1..{len(requests)})")
    window = request.candidates[args.start:args.start + args.window]
    messages = build_messages(request.query.text, window, template, budget=budget)
    cut = template.passage_budget if budget is None else budget
    print(f"# {args.dataset} query {request.query.qid}, passages {args.start + 1}-{args.start + len(window)}, "
          f"template {template.name}, passage budget {cut}, {len(messages)} messages")
    for index, message in enumerate(messages):
        print(f"\n--- [{index}] {message['role']} ({len(message['content'])} characters)")
        print(message["content"])
    sys.stdout.flush()
    return 0
