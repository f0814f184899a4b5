"""``rearank synth``: build verl RL training data (and an SFT variant) by multi-sampling passage sets."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from data_synthesis.grouprank_labels import add_label_arguments, run_labels
from data_synthesis.qa_cli import add_qa_arguments, run_qa
from data_synthesis.reasonrank import add_reasonrank_arguments, run_reasonrank
from rearank.errors import MissingDataError, RearankError
from rearank.flags import add_passage_budget_argument, add_reasoning_argument
from rearank.io.outputs import reads, writes

DESCRIPTION = """\
Multi-sampling initial-state expansion (Rearank paper, section 4.1). For each judged query, draw K distinct
sets of n passages uniformly from its top-k candidates, present them in BM25 order (or shuffled), label them
from the qrels, drop uninformative sets, and write one verl RL row per set:

  train.parquet, val.parquet   verl RL rows (data_source, prompt, ability="rerank", reward_model, extra_info);
                               ground_truth = {"labels": [relevance of passage [1]..[n] as presented]}
  sft_train.jsonl, sft_val.jsonl  (--sft) prompt/completion chat pairs whose target is the ideal ranking
  stats.json, stats.md         counts, label distribution, prompt tokens, recommended max_prompt_length

Draws are seeded per query (SHA-256 of seed and qid into NumPy's PCG64): the same seed gives the same sets on
any machine and in any query order. Queries are split into train/val (no query on both sides). Files are
renamed into place only when all are complete, manifest.json (sizes and SHA-256) last; earlier outputs in
--output-dir are replaced only with --overwrite.
"""

EPILOG = """\
examples:
  rearank synth --dataset dl21 --output-dir data/rl/dl21
  rearank synth --dataset dl21,dl22,dl23 --output-dir data/rl/dl21-23   # one split by query across all three
  rearank synth --dataset dl21 --order shuffle --sft --output-dir data/rl/dl21-shuffle
  rearank synth --run run.trec --topics topics.tsv --docs docs.tsv --qrels qrels.txt --output-dir out
  rearank synth --labels grouprank --dataset dl21 --second-run dense.trec --teacher openai \\
      --teacher-model M --output-dir data/rl/dl21-grouprank     # GroupRank's teacher labels (docs/grouprank.md)
  rearank synth --method reasonrank --dataset dl21 --teacher openai --teacher-model M --samples-per-query 2 \
      --output-dir data/rl/dl21-reasonrank   # ReasonRank: teacher lists, self-consistency filter (docs/reasonrank.md)
  rearank synth --dataset dl21 --sft --reasoning off --output-dir data/rl/dl21-answer   # answer-only rows
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``synth`` subcommand."""
    p = subparsers.add_parser(
        "synth", help="synthesize RL training data (verl parquet) from judged queries",
        description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    src = p.add_argument_group("input (a dataset pack, or run + topics + docs + qrels)")
    src.add_argument("--dataset", metavar="NAME[,NAME...]",
                     help="dataset pack name, e.g. dl21, or several separated by commas (dl21,dl22,dl23): one "
                     "output split by query across all of them, with per-source counts (see `rearank data list`)")
    reads(src.add_argument("--run", metavar="FILE",
                           help="TREC run (or RankLLM request JSONL, which needs no topics/docs)"))
    reads(src.add_argument("--topics", metavar="FILE", help="topics: qid TAB text, or BEIR queries.jsonl"))
    reads(src.add_argument("--docs", metavar="FILE", help="passages: docid TAB text, or BEIR corpus.jsonl"))
    reads(src.add_argument("--qrels", metavar="FILE",
                           help="graded qrels: TREC qrels or BEIR .tsv (default: the pack's)"))
    src.add_argument("--top-k", type=int, default=100, metavar="K", help="candidates per query to sample from (100)")
    src.add_argument("--skip-missing", action="store_true",
                     help="drop run candidates whose docid has no text in --docs (default: error)")

    smp = p.add_argument_group("sampling")
    smp.add_argument("--samples-per-query", type=int, default=50, metavar="K", help="sets drawn per query (50)")
    smp.add_argument("--set-size", type=int, default=20, metavar="N", help="passages per set (20)")
    smp.add_argument("--seed", type=int, default=0, help="random seed (0)")
    smp.add_argument("--order", choices=("bm25", "shuffle"), default="bm25",
                     help="initial order of a set: first-stage (BM25) order, or random (same sets either way)")
    smp.add_argument("--small-queries", choices=("use-all", "skip"), default="use-all",
                     help="queries with fewer candidates than --set-size: one set of all of them, or skip (use-all)")
    smp.add_argument("--val-fraction", type=float, default=0.1, metavar="F",
                     help="share of queries held out for validation (0.1; 0 = none)")

    flt = p.add_argument_group("filters (counted in stats; a set is counted under the first filter it fails)")
    flt.add_argument("--no-filter-no-relevant", dest="filter_no_relevant", action="store_false",
                     help="keep sets with no passage of relevance > 0")
    flt.add_argument("--no-filter-initial-ndcg", dest="filter_initial_ndcg", action="store_false",
                     help="keep sets whose initial nDCG@10 is below --min-initial-ndcg")
    flt.add_argument("--min-initial-ndcg", type=float, default=0.1, metavar="X",
                     help="minimum nDCG@10 of the presented order, over the set's own labels (0.1)")
    flt.add_argument("--filter-ideal-ndcg", action="store_true",
                     help="ablation: drop sets whose best order reaches nDCG@10 < --min-ideal-ndcg against all "
                     "of the query's judgments")
    flt.add_argument("--min-ideal-ndcg", type=float, default=0.1, metavar="X", help="threshold of the ablation (0.1)")

    out = p.add_argument_group("output")
    writes(out.add_argument("--output-dir", required=True, metavar="DIR",
                            help="folder for the parquet, JSONL and stats"))
    out.add_argument("--overwrite", action="store_true",
                     help="replace the synthesis outputs already in --output-dir (default: refuse)")
    out.add_argument("--sft", action="store_true", help="also write the direct-SFT JSONL (target: the ideal ranking)")
    out.add_argument("--method", default="listwise", metavar="NAME",
                     help="the method card whose rows to write: listwise (Rearank permutation answers, default), "
                     "groupwise (GroupRank JSON scores) or a plugin's ranking method (its own prompt) from sampled "
                     "sets; reasonrank: teacher lists with the "
                     "self-consistency filter (docs/reasonrank.md); barrag-selector, barrag-generator, arena (or a "
                     "plugin's card) read --qa files (docs/rag_training.md)")
    out.add_argument("--labels", choices=("grouprank",),
                     help="grouprank: teacher-labelled groupwise rows instead (docs/grouprank.md)")
    reads(out.add_argument("--template", default=None, metavar="NAME|FILE",
                           help="prompt template: rearank (listwise default), rankgpt, grouprank (groupwise default), "
                           "or a YAML file"))
    add_reasoning_argument(out)
    out.add_argument("--tokenizer", default="embedded", metavar="T",
                     help="tokenizer for prompt-token stats (and token passage budgets): 'embedded' (SmolLM2, "
                     "default), a local model folder or .gguf file, or 'none' (no token stats)")
    add_passage_budget_argument(out, "as inference does; default: the template's declared budget (rearank: 400 "
                                "characters)")
    out.add_argument("--data-source", metavar="NAME",
                     help="data_source column (default rearank/<dataset or run name>; with several datasets, "
                     "each row's own)")
    out.add_argument("--quiet", action="store_true", help="no progress bars")
    add_qa_arguments(p)
    add_label_arguments(p)
    add_reasonrank_arguments(p)
    p.set_defaults(func=run)


def _check_inputs(args: argparse.Namespace) -> None:
    if args.dataset and args.run:
        raise RearankError("give either --dataset or --run (with --topics/--docs/--qrels), not both")
    if not args.dataset:
        if not args.run:
            raise RearankError("no input: give --dataset NAME, or --run with --topics, --docs and --qrels")
        needed = ["qrels"] + ([] if str(args.run).removesuffix(".gz").endswith(".jsonl") else ["topics", "docs"])
        absent = [f"--{name}" for name in needed if not getattr(args, name)]
        if absent:
            raise RearankError(f"--run needs {', '.join(absent)} too")
    for name in ("run", "topics", "docs", "qrels"):
        value = getattr(args, name)
        if value and Path(value).is_dir():
            raise RearankError(f"--{name} {value} is a folder, expected a file")
        if value and not Path(value).is_file():
            raise MissingDataError(f"--{name} file not found: {value}")


def dataset_names(value: str | None) -> list[str]:
    """``dl21,dl22`` -> ``["dl21", "dl22"]`` (empty names and repeats are errors)."""
    if not value:
        return []
    names = [part.strip() for part in value.split(",")]
    if "" in names or len(set(names)) != len(names):
        raise RearankError(f"--dataset {value!r}: give distinct pack names separated by commas, e.g. dl21,dl22")
    return names


def load_sources(datasets: list[str], top_k: int, skip_missing: bool) -> tuple[list, dict, dict[str, str]]:
    """Requests and qrels of several packs, and qid -> pack name; a qid in two packs is an error."""
    from rearank.data.packs import load_qrels, load_requests

    requests, qrels, sources = [], {}, {}
    for name in datasets:
        for request in load_requests(dataset=name, top_k=top_k, skip_missing=skip_missing):
            qid = request.query.qid
            if qid in sources:
                raise RearankError(f"query {qid} is in both {sources[qid]} and {name}; synthesize them separately")
            sources[qid] = name
            requests.append(request)
        qrels.update({qid: judged for qid, judged in load_qrels(name).items() if sources.get(qid) == name})
    return requests, qrels, sources


def run(args: argparse.Namespace) -> int:
    """Load the input, synthesize, and print where the files went and the main figures."""
    from data_synthesis.filters import FilterConfig
    from data_synthesis.pipeline import SynthConfig, synthesize
    from data_synthesis.tokens import load_tokenizer
    from data_synthesis.writers import check_output_dir
    from rearank.data.packs import load_qrels, load_requests
    from rearank.methods.card import CARDS, cards

    if args.labels:
        return run_labels(args)
    method = CARDS.get(args.method)
    if method is None or method.synth is None:
        why = "the method writes no training rows" if method else "no such method card"
        raise RearankError(f"--method {args.method}: {why}; choose one of "
                           f"{', '.join(c.name for c in cards() if c.synth)}")
    if method.synth == "qa":
        return run_qa(args, method)
    if method.synth == "teacher":
        if not args.import_reasonrank:
            _check_inputs(args)
        return run_reasonrank(args)
    _check_inputs(args)
    if Path(args.output_dir).exists() and not Path(args.output_dir).is_dir():
        raise RearankError(f"--output-dir {args.output_dir} exists and is not a folder")
    check_output_dir(args.output_dir, args.overwrite)  # before any work
    started = time.perf_counter()
    datasets = dataset_names(args.dataset)
    sources: dict[str, str] | None = None
    if len(datasets) > 1:
        if args.qrels:
            raise RearankError("--qrels applies to one dataset; with several, each pack's own qrels are used")
        requests, qrels, sources = load_sources(datasets, args.top_k, args.skip_missing)
    else:
        requests = load_requests(dataset=args.dataset, run=args.run, topics=args.topics, docs=args.docs,
                                 top_k=args.top_k, skip_missing=args.skip_missing)
        qrels = load_qrels(args.qrels or args.dataset)
    if not requests:
        raise RearankError(f"{args.run or args.dataset}: the run is empty (no query to sample from); give a run "
                           "with queries")
    name = args.dataset or Path(args.run).name.split(".")[0]
    config = SynthConfig(
        samples_per_query=args.samples_per_query, set_size=args.set_size, seed=args.seed,
        val_fraction=args.val_fraction, order=args.order, top_k=args.top_k,
        filters=FilterConfig(
            no_relevant=args.filter_no_relevant, initial_ndcg=args.filter_initial_ndcg,
            ideal_ndcg=args.filter_ideal_ndcg, min_initial_ndcg=args.min_initial_ndcg,
            min_ideal_ndcg=args.min_ideal_ndcg,
        ),
        small_queries=args.small_queries, method=method.name, template=args.template,
        passage_budget=None if args.passage_budget is None else str(args.passage_budget), sft=args.sft,
        data_source=args.data_source or ("" if sources else f"rearank/{name}"), reasoning=args.reasoning,
    )
    config.check()
    tokenizer = load_tokenizer(args.tokenizer)
    stats = synthesize(requests, qrels, args.output_dir, config, tokenizer=tokenizer,
                       tokenizer_name=args.tokenizer, progress=not args.quiet, overwrite=args.overwrite,
                       sources=sources)
    _print_summary(stats, Path(args.output_dir), time.perf_counter() - started)
    return 0


def _print_summary(stats: dict, output_dir: Path, elapsed: float) -> None:
    splits, flt, inputs = stats["splits"], stats["filters"], stats["inputs"]
    rejected = ", ".join(f"{name} {n}" for name, n in flt["rejected"].items() if n or name in flt["enabled"])
    lines = [
        (f"queries: {inputs['queries']} in, {inputs['with_sets']} with sets "
        f"(no qrels {inputs['skipped_no_qrels']}, small {inputs['small_queries']} [{inputs['small_queries_mode']}])"),
        (f"sets: {stats['sampling']['sets_drawn']} drawn, removed: {rejected or 'none'}; kept {flt['kept']} "
        f"(train {splits['train']['sets']} / val {splits['val']['sets']} sets)"),
    ]
    for source, c in stats.get("sources", {}).items():
        lines.append(f"  {source}: {c['queries']} queries, {c['with_sets']} with sets; train {c['train_queries']} "
                     f"queries / {c['train_sets']} sets, val {c['val_queries']} / {c['val_sets']}")
    tokens = stats["prompt_tokens"]
    if tokens:
        t = tokens["all"]
        lines.append(f"prompt tokens: mean {t['mean']}, p50 {t['p50']}, p95 {t['p95']}, max {t['max']} -> "
                     f"verl data.max_prompt_length={tokens['recommended_max_prompt_length']}")
    lines.append(f"wrote {', '.join(stats['outputs'])} to {output_dir} in {elapsed:.1f}s")
    print("\n".join(lines))
