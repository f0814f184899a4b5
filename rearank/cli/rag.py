"""``rearank rag``: evaluate passage selection by what a reader answers (``eval``, ``compare``) and train a
pointwise scorer with reader feedback (``rrpo train``)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rearank.cli.rag_barrag import register_barrag
from rearank.cli.rerank import _HelpFormatter
from rearank.errors import RearankError
from rearank.flags import add_run_outcome_arguments, backend_options
from rearank.io.outputs import reads, writes
from rearank.methods.templates import RAG, names
from rearank.rag.config import QA_FORMATS, RagConfig, add_retrieval_arguments, parse_ks, retrieval_settings, styles
from rearank.rag.readers import RULE_READERS, reader_names


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``rag`` subcommand and its own subcommands."""
    p = subparsers.add_parser("rag", help="RAG: evaluate selectors by reader answers, train RRPO scorers",
                              description=__doc__, formatter_class=_HelpFormatter)
    sub = p.add_subparsers(dest="rag_command", metavar="SUBCOMMAND", required=True)
    _register_eval(sub)
    _register_corpus(sub)
    _register_compare(sub)
    _register_export(sub)
    rrpo = sub.add_parser("rrpo", help="RRPO: train a pointwise reranker with reader feedback (PPO)")
    rrpo_sub = rrpo.add_subparsers(dest="rrpo_command", metavar="SUBCOMMAND", required=True)
    _register_rrpo_train(rrpo_sub)
    register_barrag(sub)


def _register_eval(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval", help="select passages, read the top-k, score EM/F1/Hit and answer recall",
        description="For each question of a QA file (HotpotQA, 2Wiki, MuSiQue, DPR ctxs, FlashRAG JSONL), order its "
        "passages with a selector, let a reader answer from the top-k for each --k, and score EM, F1 and Hit of the "
        "answer, answer recall and supporting-passage recall of the top-k. Writes DIR/items.jsonl (one record per "
        "question, as it finishes), DIR/metrics.json and DIR/table.md (with the RRPO, BAR-RAG or ARENA paper's figures beside ours).",
        formatter_class=_HelpFormatter)
    data = p.add_argument_group("data")
    reads(data.add_argument("--data", type=Path, required=True, help="QA file (.json list or .jsonl, .gz ok)"))
    data.add_argument("--format", default="auto", choices=QA_FORMATS,
                      help="file format (auto: from the record's keys)")
    data.add_argument("--limit", type=int, help="only the first N questions")
    add_retrieval_arguments(p)
    sel = p.add_argument_group("selection")
    sel.add_argument("--selector", default="none",
                     help="none | oracle | bm25 (Lucene over the questions' own passages) | barrag:MODEL (a BAR-RAG "
                     "selector: the passages it chooses from the first 25) | METHOD:MODEL, any ranking method "
                     "(listwise:MODEL; pointwise:MODEL, a saved RRPO scorer, a cross-encoder, a causal LM, or "
                     "'embedded'; a plugin's)")
    sel.add_argument("--selector-option", "-S", action="append", default=[], metavar="KEY=VALUE",
                     help="selector option, repeatable (a ranking method: backend, its options such as window and "
                     "step, sampling, batch_size, and backend options such as kind, num_layers, device; barrag: "
                     "backend, max_new_tokens, batch_size, and backend options)")
    rd = p.add_argument_group("reader")
    rd.add_argument("--reader", default="gold", choices=reader_names(),
                    help="gold readers for checks; any other is the backend of that name running an LLM "
                    "(hf, vllm, vllm-async, openai, or a plugin's)")
    rd.add_argument("--reader-model", help="reader model (hub id, folder, .gguf, 'embedded', or the served name)")
    rd.add_argument("--reader-option", "-R", action="append", default=[], metavar="KEY=VALUE",
                    help="reader option, repeatable (gold: require=any|all; noisy-gold: p, seed; "
                    "LLM: backend options such as device=cuda, base_url=...)")
    reads(rd.add_argument("--template", default="plain", metavar="NAME|FILE",
                          help=f"reader prompt, a RAG prompt file ({', '.join(names(RAG))}) whose answer_format "
                          "names the reader card that reads it: plain, rrpo (plain), barrag_generator (BAR-RAG "
                          "generator, <answer> parsed) or arena (an ARENA generator reads the first 10 passages, "
                          "MuSiQue 20, once; --k is not used; scored for answer, format and relevance-id accuracy "
                          "with ARENA normalisation), or a plugin's; or a YAML prompt file of the same shape "
                          "(rearank/methods/*/*.yaml) to run another wording"))
    rd.add_argument("--max-new-tokens", type=int, default=32, help="reader answer budget")
    rd.add_argument("--batch-size", type=int, default=32, help="reader prompts (from many questions) per call")
    writes(rd.add_argument("--reader-cache", type=Path, help="JSONL response cache shared across runs "
                           "(default: DIR/reader_cache.jsonl)"))
    jd = p.add_argument_group("LLM judge (ARENA App. C.3)")
    jd.add_argument("--judge", metavar="MODEL", help="also judge each answer with this model at temperature 0: "
                    "correct when it matches a gold answer or a synonym (column 'LLM judge'; the paper used GPT-4o)")
    jd.add_argument("--judge-backend", default="openai", choices=reader_names()[len(RULE_READERS):],
                    help="backend of the judge (default openai: an API model or any OpenAI-compatible server)")
    jd.add_argument("--judge-option", "-J", action="append", default=[], metavar="KEY=VALUE",
                    help="judge backend option, repeatable (e.g. base_url=http://host:8000/v1)")
    sc = p.add_argument_group("scoring and output")
    sc.add_argument("--k", default="1,3,5", help="comma-separated top-k values read by the reader")
    sc.add_argument("--style", default="squad", choices=list(styles()), help="answer normalisation")
    writes(sc.add_argument("--output-dir", type=Path, required=True, metavar="DIR", help="output folder"))
    sc.add_argument("--label", help="run name in the table (default: selector + reader)")
    sc.add_argument("--resume", action="store_true", help="keep the questions already in DIR/items.jsonl (those with "
                    "a failed read are read again)")
    add_run_outcome_arguments(sc)
    sc.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run_eval)


def _register_corpus(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "corpus", help="pool the paragraphs of QA files into one BEIR corpus.jsonl for open retrieval",
        description="Write every paragraph of the given QA files once (the same title and text, after whitespace "
        "and case normalisation, is one passage) as a BEIR corpus.jsonl whose ids are digests of the passage "
        "(stable across runs and input orders). `rag eval --corpus FILE` then retrieves each question's candidates "
        "from the whole pool, so gold paragraphs compete with every other question's.",
        formatter_class=_HelpFormatter)
    reads(p.add_argument("--qa", nargs="+", action="extend", type=Path, required=True, metavar="FILE",
                         help="QA files to pool (repeatable: --qa A --qa B pools both)"))
    p.add_argument("--format", default="auto", choices=("auto", "hotpotqa", "2wiki", "musique", "dpr", "flashrag"),
                   help="file format (auto: from the record's keys)")
    writes(p.add_argument("--output", "-o", type=Path, required=True, help="corpus.jsonl to write"))
    writes(p.add_argument("--queries", type=Path, metavar="FILE",
                          help="also write the questions as BEIR queries.jsonl (for `rearank bm25 --topics`)"))
    p.set_defaults(func=run_corpus)


def run_corpus(args: argparse.Namespace) -> int:
    """Run ``rearank rag corpus``."""
    from rearank.rag.corpus import write_pooled_corpus

    counts = write_pooled_corpus(args.qa, args.output, args.format, args.queries)
    print(f"{counts['paragraphs']} paragraphs of {counts['questions']} questions in {counts['files']} files -> "
          f"{counts['passages']} passages in {args.output}" + (f"; questions in {args.queries}" if args.queries else ""))
    return 0


def _register_compare(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="paired tests between two rag eval folders",
                       description="Compare two `rag eval` output folders question by question at one k: means, "
                       "paired t-test and randomization test p-values, wins/ties/losses of B against A.",
                       formatter_class=_HelpFormatter)
    reads(p.add_argument("a", type=Path, help="baseline folder (A)"))
    reads(p.add_argument("b", type=Path, help="folder compared against it (B)"))
    p.add_argument("--k", default="3", help="the top-k to compare at ('arena' for ARENA runs)")
    p.add_argument("--permutations", type=int, default=10000, help="randomization test samples")
    p.add_argument("--seed", type=int, default=0, help="randomization test seed")
    p.set_defaults(func=run_compare)


def _register_export(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export", help="write an ir_datasets QA collection (dpr-w100/...) as DPR ctxs JSONL for rag eval",
        description="Write the questions of an ir_datasets QA collection (dpr-w100/natural-questions/dev|train, "
        "dpr-w100/trivia-qa/dev|train; `pip install 'ir_datasets[ijson]'`, and a download on first use) as DPR "
        "ctxs JSONL: each question with its answers and its judged passages (DPR positives marked isgold, "
        "hasanswer by answer string), in a seeded random order. `rag eval --data FILE` reads it.",
        formatter_class=_HelpFormatter)
    p.add_argument("dataset", help="ir_datasets id, e.g. dpr-w100/natural-questions/dev")
    writes(p.add_argument("--output", "-o", type=Path, required=True, help="JSONL to write (.gz allowed)"))
    p.add_argument("--limit", type=int, help="first N questions with judged passages")
    p.add_argument("--seed", type=int, default=0, help="seed of the passage order")
    p.set_defaults(func=run_export)


def run_export(args: argparse.Namespace) -> int:
    from rearank.rag.qa_export import export_qa

    if args.limit is not None and args.limit < 1:
        raise RearankError(f"--limit must be at least 1, got {args.limit}")
    count = export_qa(args.dataset, args.output, limit=args.limit, seed=args.seed)
    print(f"{count} questions -> {args.output}")
    return 0


def _register_rrpo_train(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train a pointwise scorer with RRPO",
                       description="RRPO training (plain PyTorch): Plackett-Luce episodes of k picks, reader reward "
                       "EM+F1+Hit, reference-anchored GAE, PPO-clip with a k3 KL penalty. Settings come from a YAML "
                       "file whose keys are those of rearank.rag.rrpo.trainer.RRPOConfig; --set overrides them.",
                       formatter_class=_HelpFormatter)
    reads(p.add_argument("--config", type=Path, required=True,
                         help="YAML settings (data, output, scorer, reader, k, ...)"))
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a setting, repeatable")
    p.add_argument("--resume", action="store_true", help="continue from OUTPUT/checkpoint")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run_rrpo_train)


def _check_reader_options(config: RagConfig) -> None:
    """``--max-new-tokens``, and an LLM reader's model and ``-R`` options checked against its backend (kinds, ranges,
    a device this machine has), before a question is read or a file written (each server of a ``base_url`` list)."""
    from rearank.backends.registry import backend_class

    if config.max_new_tokens < 1:  # whatever the reader: a bad value is refused, not ignored
        raise RearankError(f"--max-new-tokens must be at least 1, got {config.max_new_tokens}")
    if config.reader in RULE_READERS:
        return
    options = dict(config.reader_options)
    urls = options.get("base_url")
    for one in ([{**options, "base_url": url} for url in urls] if isinstance(urls, (list, tuple)) and urls
                else [options]):
        backend_class(config.reader, config.reader_model, **one)


def _make_reader(name: str, model: str | None, options: dict[str, Any], template: str, max_new_tokens: int,
                 batch_size: int, cache_path: Path | None) -> Any:
    from rearank.backends.base import SamplingSettings
    from rearank.backends.cache import ResponseCache
    from rearank.rag.readers import make_reader

    if name in RULE_READERS:
        if model:
            raise RearankError(f"the {name} reader takes no --reader-model")
        try:
            return make_reader(name, template=template, **options)
        except TypeError as err:
            raise RearankError(f"bad --reader-option for the {name} reader: {err}") from None
    if max_new_tokens < 1 or batch_size < 1:
        raise RearankError("--max-new-tokens and --batch-size must be at least 1")
    return make_reader(name, model, template=template, settings=SamplingSettings(max_new_tokens=max_new_tokens),
                       cache=ResponseCache(cache_path), batch_size=batch_size, **options)


@contextlib.contextmanager
def _closing(reader: Any, on_interrupt: str) -> Iterator[None]:
    """Close ``reader`` (its response cache) at the end; on Ctrl-C say how to resume, then re-raise."""
    try:
        yield
    except KeyboardInterrupt:
        print(on_interrupt, file=sys.stderr)
        raise
    finally:
        if hasattr(reader, "close"):
            reader.close()


def rag_config(args: argparse.Namespace) -> RagConfig:
    """The ``rag eval`` settings of the parsed flags, checked (before any question, corpus or model loads)."""
    return RagConfig(
        data=args.data, output_dir=args.output_dir, format=args.format, limit=args.limit,
        retrieval=retrieval_settings(args), selector=args.selector,
        selector_options=backend_options(args.selector_option), reader=args.reader, reader_model=args.reader_model,
        reader_options=backend_options(args.reader_option), template=args.template,
        max_new_tokens=args.max_new_tokens, batch_size=args.batch_size, reader_cache=args.reader_cache,
        judge=args.judge, judge_backend=args.judge_backend, judge_options=backend_options(args.judge_option),
        ks=parse_ks(args.k), style=args.style, label=args.label, resume=args.resume, progress=not args.no_progress)


def run_eval(args: argparse.Namespace) -> int:
    """Run ``rearank rag eval``."""
    return evaluate(rag_config(args), args.fail_share)


def evaluate(config: RagConfig, fail_share: float = 1.0) -> int:
    """Run ``rag eval`` with ``config``: load the questions, retrieve, select, read, score; print the table. A run in
    which at least ``fail_share`` of the reads failed (and one did) ends with a one-line error naming the first
    cause."""
    from rearank.io.qa import load_qa
    from rearank.rag.evaluate import RagEvaluation, first_reader_error
    from rearank.rag.selectors import make_selector

    _check_reader_options(config)
    config.check_resume()
    items = load_qa(config.data, config.format, config.limit)
    if not items:
        raise RearankError(f"{config.data}: no questions")
    qids = [i.qid for i in items]
    if len(set(qids)) != len(qids):
        raise RearankError(f"{config.data}: question ids repeat; they must be unique")
    items, run, retrieval = config.retrieval.retrieve(items, progress=config.progress)
    evaluation = RagEvaluation(config.output_dir, config.record(retrieval), resume=config.resume)
    if config.resume:
        print(f"resume: {sum(q in evaluation.records for q in qids)} of {len(items)} questions already in "
              f"{evaluation.items_path}", file=sys.stderr)
    if run is not None:
        from rearank.io.trec import write_run

        write_run(config.output_dir / "candidates.trec", run,
                  tag="bm25" if config.retrieval.candidates is None else "candidates")
    selector = make_selector(config.selector, **config.selector_options)
    reader = _make_reader(config.reader, config.reader_model, dict(config.reader_options), config.template,
                          config.max_new_tokens, config.batch_size, config.reader_cache_path)
    judge = None
    if config.judge:
        from rearank.backends.cache import ResponseCache
        from rearank.rag.judge import make_judge

        judge = make_judge(config.judge, config.judge_backend,
                           ResponseCache(config.output_dir / "judge_cache.jsonl"), **config.judge_options)
    with _closing(reader, f"interrupted: finished questions are in {evaluation.items_path}; rerun with --resume"):
        metrics = evaluation.run(items, selector, reader, list(config.ks), style=config.style,
                                 chunk=config.batch_size, progress=config.progress, reading=config.reading, judge=judge)
    if judge is not None:
        judge.close()
    print((config.output_dir / "table.md").read_text(encoding="utf-8"), end="")
    failed = sum(m["reader_failed"] for m in metrics["k"].values())
    print(f"reader calls: {getattr(reader, 'generated', 'n/a')}; failed reads (scored as wrong): {failed}; "
          f"items: {evaluation.items_path}; metrics: {config.output_dir / 'metrics.json'}")
    total = metrics["questions"] * len(metrics["k"])
    if failed and failed >= fail_share * total:
        which = f"all {total}" if failed == total else f"{failed} of {total}"
        cause = first_reader_error(evaluation.records.values()) or "the reader gave no reason"
        raise RearankError(f"{which} reads failed (first: {cause}); they were scored as wrong: fix the cause and "
                           "rerun with --resume to read them again")
    return 0


def run_compare(args: argparse.Namespace) -> int:
    """Run ``rearank rag compare``."""
    from rearank.rag.evaluate import compare_runs

    print(compare_runs(args.a, args.b, args.k, permutations=args.permutations, seed=args.seed))
    return 0


def run_rrpo_train(args: argparse.Namespace) -> int:
    """Run ``rearank rag rrpo train``."""
    from rearank.rag.rrpo.trainer import RRPOConfig, build_trainer

    config = RRPOConfig.from_yaml(args.config, backend_options(args.set))
    reader = _make_reader(config.reader, config.reader_model, dict(config.reader_options), config.reader_template,
                          32, config.batch_size, Path(config.reader_cache) if config.reader_cache else
                          Path(config.output) / "reader_cache.jsonl")
    with _closing(reader, f"interrupted: rerun with --resume to continue from {Path(config.output) / 'checkpoint'}"):
        trainer = build_trainer(config, reader, resume=args.resume)
        trainer.train(progress=not args.no_progress)
    if not trainer.group.main:
        return 0  # under torchrun the first rank reports
    lines = [json.loads(x) for x in (Path(config.output) / "log.jsonl").read_text(encoding="utf-8").splitlines()]
    last = [r for r in lines if "reward" in r][-1]
    print(f"trained {trainer.step} steps; last step reward {last['reward']:+.4f} (reference {last['ref_reward']:+.4f}),"
          f" KL {last['kl']:.4f}; baseline reader calls {trainer.baseline_calls}")
    for r in lines:
        if "heldout" in r:
            print(f"held-out, {r['heldout']}: mean step reward {r['heldout_mean_step_reward']:+.4f}, "
                  f"EM@{config.k} {r['heldout_em']:.4f}")
    print(f"scorer: {Path(config.output) / 'final'} (use --selector pointwise:{Path(config.output) / 'final'})")
    return 0
