"""``rearank rerank``: rerank a first-stage run with a listwise reasoning LLM (or groupwise with ``--mode``).

Finished queries are appended to the run and traces files as they complete, so an interrupted run is a
valid partial run; ``--resume`` continues it. With qrels, nDCG@10 is printed before and after.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from rearank import job
from rearank.backends.base import SamplingSettings
from rearank.backends.options import parse_pairs
from rearank.driver import Reranker, check_settings
from rearank.errors import RearankError
from rearank.job import ALL_CANDIDATES, DEFAULT_MAX_NEW_TOKENS, EMBEDDED_MAX_NEW_TOKENS
from rearank.prompts import load_template
from rearank.types import Request
from rearank.window import window_count

BACKENDS = ("hf", "vllm", "openai", "oracle")
#: Settings a ``--preset`` may fill, and their parser defaults (a flag still at its default takes the preset's).
_PRESET_KEYS = ("prompt", "temperature", "top_p", "max_new_tokens", "group_size", "fusion_weight", "fusion",
                "shuffle_all")
_DEFAULTS: dict[str, Any] = {}


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Show a default only when there is one and the help text does not already say it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default in (None, False, [], argparse.SUPPRESS) or "default" in text:
            return text
        return super()._get_help_string(action) or text


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``rerank`` subcommand."""
    p = subparsers.add_parser(
        "rerank",
        help="rerank a run with a listwise reasoning LLM",
        description="Rerank a first-stage run with a listwise LLM over sliding windows (Rearank / RankGPT), "
        "batching the windows of many queries per backend call. Writes a TREC run, per-window traces "
        "(JSONL) and run statistics (<output>.stats.json).",
        formatter_class=_HelpFormatter,
    )
    src = p.add_argument_group("input (one of --dataset, --run, --requests)")
    source = src.add_mutually_exclusive_group(required=True)
    source.add_argument("--dataset", help="registered dataset pack, e.g. dl19, dl21, beir-scifact")
    source.add_argument("--run", type=Path, help="TREC run to rerank (needs --topics and --docs)")
    source.add_argument("--requests", type=Path, help="RankLLM request JSONL (query + candidates with text)")
    src.add_argument("--topics", type=Path, help="topics: 'qid TAB text' TSV or BEIR queries.jsonl")
    src.add_argument("--docs", type=Path, help="docs: 'docid TAB text' TSV or BEIR corpus.jsonl")
    src.add_argument("--qrels", type=Path, help="qrels (TREC or BEIR .tsv) to print nDCG@10 before and after; "
                     "default: the dataset's qrels")
    src.add_argument("--max-queries", type=int, help="rerank only the first N queries")
    src.add_argument("--skip-missing", action="store_true", help="drop candidates without text instead of failing")

    model = p.add_argument_group("model")
    model.add_argument("--backend", choices=BACKENDS, default="hf", help="generation backend")
    model.add_argument("--model", help="model: hub id, local folder, .gguf file or 'embedded' "
                       "(default: the embedded SmolLM2-135M-Instruct for hf)")
    model.add_argument("--backend-option", "-O", action="append", default=[], metavar="KEY=VALUE",
                       help="extra backend option, repeatable (e.g. -O device=cuda, -O base_url=http://host:8000/v1)")
    model.add_argument("--max-new-tokens", type=int,
                       help=f"generation budget per window (default {DEFAULT_MAX_NEW_TOKENS}; "
                       f"{EMBEDDED_MAX_NEW_TOKENS} with the embedded model)")
    model.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    model.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass (with --temperature > 0)")
    model.add_argument("--seed", type=int, default=0, help="sampling seed (and groupwise shuffle seed)")

    rank = p.add_argument_group("reranking")
    rank.add_argument("--mode", choices=("listwise", "groupwise", "pointwise"), default="listwise",
                      help="listwise sliding windows, groupwise scoring (GroupRank), or a pointwise scorer "
                      "(--model: a saved RRPO scorer, a cross-encoder or a causal LM; -O kind=, device=, num_layers=)")
    rank.add_argument("--prompt", help="builtin template (rearank, rankgpt) or a YAML template file "
                      "(default: rearank; grouprank for --mode groupwise)")
    rank.add_argument("--window", type=int, default=20, help="passages per window")
    rank.add_argument("--step", type=int, default=10, help="window stride")
    rank.add_argument("--passes", type=int, default=1, help="sliding passes over the list")
    rank.add_argument("--top-k", type=int, default=100, help="rerank the first K candidates; the rest follow them")
    rank.add_argument("--batch-size", type=int, default=32, help="windows (from as many queries) per backend call")
    rank.add_argument("--passage-budget", metavar="BUDGET",
                      help="cut each passage to N characters, words or tokens (e.g. 400c, 300w, 300t, none); "
                      "default: the budget the template declares (rearank 400 characters, rankgpt 300)")
    rank.add_argument("--max-passage-tokens", dest="passage_budget", type=int, help=argparse.SUPPRESS)
    rank.add_argument("--engine", choices=("local", "ray"), default="local",
                      help="local: this process; ray: each round of windows (all queries) as a Ray Dataset on "
                      "the cluster at RAY_ADDRESS (vllm: Ray Data LLM engine replicas; -O concurrency=N, "
                      "-O batch_size=N, other -O go to the engine), resumable by round")

    group = p.add_argument_group("groupwise (--mode groupwise)")
    group.add_argument("--group-size", type=int, default=20, help="documents per group")
    group.add_argument("--group-step", type=int, help="slide groups by this step (default: partition the top-k)")
    group.add_argument("--shuffles", type=int, default=1, help="orderings of the top-k to average over")
    group.add_argument("--fusion-weight", type=float, help="weight of the rerank score fused with the retriever's")
    group.add_argument("--fallback", choices=("retriever", "zero"), default="retriever",
                       help="scores of a group whose answer has no valid score")
    group.add_argument("--preset", choices=("grouprank-released",),
                       help="grouprank-released: GroupRank's released inference (one user message of [i]. text, "
                       "3,000 characters, temperature 0.3, top-p 0.8, 8,000 new tokens, reshuffled repeats, "
                       "0.6 x score/10 + 0.4 x raw retriever score); flags left at their defaults take its values")
    p.set_defaults(fusion="minmax", shuffle_all=False)
    _DEFAULTS.update({key: p.get_default(key) for key in _PRESET_KEYS})

    out = p.add_argument_group("output")
    out.add_argument("--output", "-o", type=Path, required=True, help="TREC run to write")
    out.add_argument("--traces", type=Path, help="per-window traces JSONL (default: <output>.traces.jsonl)")
    out.add_argument("--tag", default="rearank", help="run tag (last column)")
    out.add_argument("--resume", action="store_true", help="keep the queries already complete in --output")
    out.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``rearank rerank``; returns the exit code."""
    from rearank.data import packs

    _check_args(args)
    _apply_preset(args)
    if args.mode == "listwise":  # bad settings or template fail before any data or model is loaded
        check_settings(window=args.window, step=args.step, passes=args.passes, top_k=args.top_k,
                       batch_size=args.batch_size, passage_budget=args.passage_budget)
        load_template(args.prompt or "rearank")
    elif args.mode == "groupwise":
        from rearank.grouprank import check_group_settings, load_group_template

        check_group_settings(group_size=args.group_size, group_step=args.group_step, shuffles=args.shuffles,
                             fusion_weight=args.fusion_weight, fallback=args.fallback, top_k=args.top_k,
                             batch_size=args.batch_size, passage_budget=args.passage_budget, fusion=args.fusion)
        load_group_template(args.prompt)
    if args.requests is not None:
        requests = packs.read_request_file(args.requests, max_queries=args.max_queries)
    else:
        requests = packs.load_requests(
            dataset=args.dataset, run=args.run, topics=args.topics, docs=args.docs,
            top_k=ALL_CANDIDATES, skip_missing=args.skip_missing, max_queries=args.max_queries,
        )
    if not requests:
        raise RearankError(f"{args.run or args.requests or args.dataset}: no query to rerank (the input is empty)")
    job.check_unique_qids(requests)
    qrels = _load_qrels(args, packs)
    if args.backend == "oracle" and qrels is None:
        raise RearankError("the oracle backend ranks by relevance judgments: pass --qrels (or a --dataset with qrels)")

    windows = {r.query.qid: n for r in requests if (n := _windows_per_query(args, len(r.candidates))) is not None}

    def make_reranker() -> Any:
        reranker = _make_reranker(args, qrels)
        return _round_engine(args, reranker) if args.engine == "ray" else reranker

    stats, extra = job.rerank_to_files(requests, make_reranker, output=args.output, traces=args.traces,
                                       resume=args.resume, tag=args.tag, progress=not args.no_progress,
                                       config=_config(args), windows=windows, inputs=_inputs(args))
    traces, stats_path = job.output_paths(args.output, args.traces)
    print(f"reranked {stats.summary()}")
    if qrels is not None:
        extra["ndcg_cut_10"] = _report_ndcg(requests, qrels, args.output)
    stats.write(stats_path, extra=extra)
    print(f"run: {args.output}\ntraces: {traces}\nstats: {stats_path}")
    return 0


def _check_args(args: argparse.Namespace) -> None:
    if args.requests is not None and (args.topics or args.docs):
        raise RearankError("--requests files hold query and passage texts; --topics/--docs apply to --run only")
    if args.run is not None and not (args.topics and args.docs):
        raise RearankError("--run needs --topics and --docs (or use --dataset, or --requests with texts)")
    for name in ("max_queries", "max_new_tokens"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise RearankError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    if not (args.temperature >= 0 and math.isfinite(args.temperature)):
        raise RearankError(f"--temperature must be a finite number >= 0 (0 = greedy), got {args.temperature}")
    if not 0 < args.top_p <= 1:
        raise RearankError(f"--top-p must be in (0, 1], got {args.top_p}")
    if args.output.is_dir():
        raise RearankError(f"--output {args.output} is a folder; give a file name")


def _inputs(args: argparse.Namespace) -> dict[str, Path | None]:
    prompt = Path(args.prompt) if args.prompt and Path(args.prompt).is_file() else None
    return {"--run": args.run, "--requests": args.requests, "--topics": args.topics, "--docs": args.docs,
            "--qrels": args.qrels, "--prompt": prompt}


def _windows_per_query(args: argparse.Namespace, n_candidates: int) -> int | None:
    """How many window traces a finished query has: listwise windows x passes, or groups x shuffles (None:
    pointwise scoring, which has no windows to count)."""
    if args.mode == "pointwise":
        return None
    if args.mode == "listwise":
        return window_count(n_candidates, args.window, args.step, args.passes, args.top_k)
    from rearank.grouprank.ranker import partition, sliding_groups

    n = min(n_candidates, args.top_k)
    if n < 2:
        return 0

    spans = partition(n, args.group_size) if args.group_step is None else sliding_groups(n, args.group_size,
                                                                                          args.group_step)
    return len(spans) * args.shuffles


def _load_qrels(args: argparse.Namespace, packs: Any) -> dict[str, dict[str, int]] | None:
    if args.qrels is not None:
        return packs.load_qrels(args.qrels)
    if args.dataset is not None:
        pack = packs.resolve(args.dataset)
        return packs.load_qrels(pack.qrels) if pack.qrels.is_file() else None
    return None


def backend_options(pairs: list[str]) -> dict[str, Any]:
    """Parse repeated ``-O KEY=VALUE`` flags into backend keyword options (shared with ``rearank benchmark``).

    Values are checked against the chosen backend's declared options when it is built (:func:`make_backend`).
    """
    return parse_pairs(pairs)


def max_new_tokens_for(args: argparse.Namespace) -> int:
    """``--max-new-tokens``, else the default for the chosen model (smaller for the embedded one)."""
    if args.max_new_tokens is not None:
        return args.max_new_tokens
    return job.default_max_new_tokens(args.backend, args.model)


def _make_reranker(args: argparse.Namespace, qrels: dict[str, dict[str, int]] | None) -> Any:
    if args.mode == "pointwise":
        from rearank.methods.pointwise import PointwiseReranker, PointwiseScorer

        scorer = PointwiseScorer.from_options(args.model or "embedded", backend_options(args.backend_option))
        return PointwiseReranker(scorer, top_k=args.top_k)
    try:
        from rearank.backends.registry import make_backend
    except ImportError as err:
        raise RearankError(f"backends are not available in this installation ({err}); reinstall with `make setup`")
    options = backend_options(args.backend_option)
    if args.backend == "oracle":
        options["qrels"] = qrels
    settings = SamplingSettings(max_new_tokens=max_new_tokens_for(args), temperature=args.temperature,
                                top_p=args.top_p, seed=args.seed)
    if args.engine == "ray":
        from rearank.ray_engine import RayGenerator

        backend = RayGenerator(args.backend, args.model, options, settings, groupwise=args.mode == "groupwise",
                               batch_size=args.batch_size, progress=not args.no_progress)
    else:
        backend = make_backend(args.backend, args.model, **options)
    common = {"top_k": args.top_k, "settings": settings, "batch_size": args.batch_size,
              "passage_budget": args.passage_budget}
    if args.mode == "listwise":
        return Reranker(backend, template=args.prompt or "rearank", window=args.window, step=args.step,
                        passes=args.passes, **common)
    try:
        from rearank.grouprank import GroupReranker
    except ImportError as err:
        raise RearankError(f"--mode groupwise needs rearank.grouprank, which cannot be imported ({err})") from None
    template = {"template": args.prompt} if args.prompt else {}
    return GroupReranker(backend, group_size=args.group_size, group_step=args.group_step, shuffles=args.shuffles,
                         seed=args.seed, fusion_weight=args.fusion_weight, fallback=args.fallback,
                         fusion=args.fusion, shuffle_all=args.shuffle_all, **template, **common)


def _apply_preset(args: argparse.Namespace) -> None:
    """Fill the settings of ``--preset`` that were left at their defaults (groupwise only)."""
    if not getattr(args, "preset", None):
        return
    from rearank.grouprank.presets import preset

    if args.mode != "groupwise":
        raise RearankError(f"--preset {args.preset} is a groupwise preset: add --mode groupwise")
    for key, value in preset(args.preset).items():
        if getattr(args, key) == _DEFAULTS.get(key):
            setattr(args, key, value)


#: Settings a resumed ``--engine ray`` run must share with the round journal it continues.
ROUND_KEYS = ("mode", "backend", "model", "prompt", "window", "step", "passes", "top_k", "max_new_tokens",
              "temperature", "top_p", "seed", "passage_budget", "group_size", "group_step", "shuffles", "fallback")


def _round_engine(args: argparse.Namespace, reranker: Any) -> Any:
    """The round-by-round engine over ``reranker``'s windows, journaled in ``<output>.rounds.jsonl``."""
    from rearank.rounds import Journal, RoundEngine, method_for

    config = _config(args)
    journal = Journal(args.output.with_name(args.output.name + ".rounds.jsonl"),
                      {key: config.get(key) for key in ROUND_KEYS}, resume=args.resume)
    return RoundEngine(method_for(reranker), reranker.backend, journal)


def _config(args: argparse.Namespace) -> dict[str, Any]:
    skip = {"func", "command", "backend_option"}
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k not in skip}
    config["max_new_tokens"] = max_new_tokens_for(args)
    return config


def _report_ndcg(requests: list[Request], qrels: dict[str, dict[str, int]], output: Path) -> dict[str, float]:
    """Print and return nDCG@10 of the first-stage order and of the reranked run, on the judged input queries."""
    scores = job.ndcg_before_after(requests, qrels, output)
    if not scores:
        print("nDCG@10: no input query has judgments in the qrels", file=sys.stderr)
        return {}
    b, a = scores["before"], scores["after"]
    print(f"nDCG@10 on {scores['queries']} judged queries: before {b:.4f} -> after {a:.4f} ({a - b:+.4f})")
    return scores
