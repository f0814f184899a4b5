"""ReasonRank's training data (Liu et al., arXiv 2508.07050): ``rearank synth --mode reasonrank``.

Per judged query, lists of at most 20 passages are drawn from its top-k (:func:`data_synthesis.sampling.draw_sets`);
a teacher (any backend: an OpenAI-compatible server with a reasoning model, vLLM, hf, or the oracle for mechanics)
ranks each list with its reasoning, asked with the reasoning variant of the template. The self-consistency filter
keeps a list only when the nDCG@10 of the teacher's order against the list's relevant passages (qrels grades as
gains) is at least ``alpha`` (0.4, the paper's). Kept lists become

* SFT rows: the student prompt (the template with or without reasoning, ``--reasoning``) and the teacher's answer
  (``<think>`` its reasoning ``</think>`` then ``<answer>`` its order, or the ``<answer>`` alone);
* verl RL rows whose ground truth is the ReasonRank reward's (:mod:`rearank.methods.listwise.reasonrank`): the
  window's ``ids``, the teacher's order as ``gold`` and the ``relevant`` passages with their grades.

:func:`read_released` imports ReasonRank's published ``training_data_all.jsonl`` (``qid``, ``initial_list``,
``final_list``, ``reasoning``, ``relevant_docids``; texts from topics and docs files) into the same lists, so the
same filter and rows apply (their relevant passages get grade 1).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from data_synthesis.grouprank_labels import ListwiseFormat, write_sft_parquet
from data_synthesis.sampling import ORDERS, draw_sets, split_queries
from data_synthesis.stats import spread
from data_synthesis.writers import staged_outputs, write_jsonl, write_parquet, write_text
from rearank.backends.base import Backend, Prompt, SamplingSettings
from rearank.errors import FormatError, RearankError
from rearank.io.files import iter_json_lines
from rearank.io.outputs import reads
from rearank.measures.ndcg import ndcg_at_k
from rearank.methods.listwise.answer import format_answer, parse_answer
from rearank.methods.listwise.reasonrank import Truth, ranking_parts, truth_record
from rearank.prompts import as_budget, build_messages, with_reasoning
from rearank.types import Candidate, Request

_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL | re.IGNORECASE)
#: Bins of the teacher nDCG@10 histogram in the stats.
BINS = 10


@dataclass(frozen=True)
class ReasonRankConfig:
    """Settings of ``--mode reasonrank`` (paper values where it states them)."""

    set_size: int = 20             # paper: lists of at most 20 passages
    samples_per_query: int = 1     # ours: lists drawn per query
    alpha: float = 0.4             # paper: the self-consistency threshold on the teacher list's nDCG@10
    order: str = "bm25"
    seed: int = 0
    val_fraction: float = 0.1
    reasoning: bool = True         # rows with the teacher's reasoning, or answer-only rows
    template: str = "rearank"
    max_new_tokens: int = 3072     # paper: reasoning of at most 3,072 tokens
    temperature: float = 0.0
    passage_budget: str | None = None  # None: the template's

    def check(self) -> None:
        if not 0.0 <= self.alpha <= 1.0:
            raise RearankError(f"--min-teacher-ndcg must be in [0, 1], got {self.alpha}")
        if self.set_size < 2 or self.samples_per_query < 1:
            raise RearankError("--set-size must be at least 2 and --samples-per-query at least 1")
        if self.order not in ORDERS:
            raise RearankError(f"order must be one of {', '.join(ORDERS)}, got {self.order!r}")
        if not 0.0 <= self.val_fraction < 1.0:
            raise RearankError(f"validation fraction must be in [0, 1), got {self.val_fraction}")


@dataclass(frozen=True)
class Listing:
    """One list and its teacher's answer: ``order`` the teacher's docids best first (None: the answer was not a full
    permutation), ``reasoning`` its reasoning text, ``relevant`` the list's relevant docids with their grades."""

    qid: str
    query: str
    index: int
    candidates: tuple[Candidate, ...]
    relevant: Mapping[str, float]
    order: tuple[str, ...] | None
    reasoning: str
    status: str

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(c.docid for c in self.candidates)

    def teacher_ndcg(self) -> float:
        """nDCG@10 of the teacher's order against the list's relevant passages (0 without an order)."""
        if self.order is None:
            return 0.0
        return ranking_parts(list(self.order), Truth(self.ids, self.order, self.relevant))["ndcg"]


def draw_lists(requests: Sequence[Request], qrels: Mapping[str, Mapping[str, int]], config: ReasonRankConfig,
               top_k: int) -> list[tuple[Request, int, tuple[Candidate, ...]]]:
    """The lists of every judged query: ``(request, list index, passages in presented order)``."""
    lists = []
    for request in requests:
        cands = request.candidates[:top_k]
        if not qrels.get(request.query.qid) or len(cands) < 2:
            continue
        drawn = draw_sets(request.query.qid, len(cands), min(config.set_size, len(cands)), config.samples_per_query,
                          config.seed, config.order)
        lists.extend((request, index, tuple(cands[p] for p in positions)) for index, positions in enumerate(drawn.sets))
    return lists


def teacher_listings(lists: Sequence[tuple[Request, int, tuple[Candidate, ...]]],
                     qrels: Mapping[str, Mapping[str, int]], teacher: Backend, config: ReasonRankConfig,
                     batch: int = 16) -> list[Listing]:
    """Ask the teacher to rank every list, with reasoning (the template's reasoning variant)."""
    template = with_reasoning(config.template, True)
    settings = SamplingSettings(max_new_tokens=config.max_new_tokens, temperature=config.temperature,
                                seed=config.seed)
    listings = []
    for start in range(0, len(lists), batch):
        part = lists[start:start + batch]
        prompts = [Prompt(messages=tuple(build_messages(r.query.text, cands, template, budget=config.passage_budget)),
                          qid=r.query.qid,
                          docids=tuple(c.docid for c in cands)) for r, _, cands in part]
        for (request, index, cands), generation in zip(part, teacher.generate(prompts, settings), strict=True):
            parsed = parse_answer(generation.text, len(cands))
            full = parsed.status == "ok"
            think = _THINK.search(generation.text)
            judged = qrels.get(request.query.qid, {})
            listings.append(Listing(
                qid=request.query.qid, query=request.query.text, index=index, candidates=cands,
                relevant={c.docid: judged[c.docid] for c in cands if judged.get(c.docid, 0) > 0},
                order=tuple(cands[i].docid for i in parsed.permutation) if full else None,
                reasoning=think.group(1).strip() if think else "", status=parsed.status))
    return listings


def read_released(path: str | Path, topics: Mapping[str, str], docs: Mapping[str, tuple[str, str]]) -> list[Listing]:
    """ReasonRank's ``training_data_all.jsonl`` as listings; a record whose query or a passage has no text, or whose
    ``final_list`` is not a permutation of its ``initial_list``, is a one-line error naming its line."""
    listings: list[Listing] = []
    per_query: Counter = Counter()
    for line, record in iter_json_lines(path):
        try:
            qid, initial, final = str(record["qid"]), [str(d) for d in record["initial_list"]], \
                [str(d) for d in record["final_list"]]
            relevant = {str(d): 1 for d in record.get("relevant_docids") or ()}
        except (KeyError, TypeError) as err:
            raise FormatError(path, line, f"not a ReasonRank record (qid, initial_list, final_list: {err})") from None
        if sorted(initial) != sorted(final) or len(set(initial)) != len(initial):
            raise FormatError(path, line, "final_list is not a permutation of initial_list")
        if qid not in topics:
            raise FormatError(path, line, f"query {qid} has no text in the topics file")
        missing = [d for d in initial if d not in docs]
        if missing:
            raise FormatError(path, line, f"passage {missing[0]} has no text in the docs file")
        cands = tuple(Candidate(d, 0.0, text=docs[d][1], title=docs[d][0]) for d in initial)
        per_query[qid] += 1
        listings.append(Listing(qid=qid, query=topics[qid], index=per_query[qid] - 1,
                                candidates=cands, relevant={d: g for d, g in relevant.items() if d in set(initial)},
                                order=tuple(final), reasoning=str(record.get("reasoning") or "").strip(), status="ok"))
    return listings


def completion(listing: Listing, reasoning: bool) -> str:
    """The SFT target: the teacher's reasoning in ``<think>`` (``reasoning``) and its order in ``<answer>``."""
    assert listing.order is not None
    ids = listing.ids
    answer = f"<answer>{format_answer([ids.index(d) for d in listing.order])}</answer>"
    return f"<think>\n{listing.reasoning}\n</think>\n{answer}" if reasoning else answer


def build_rows(listings: Sequence[Listing], config: ReasonRankConfig, data_source: str
               ) -> tuple[dict[str, list], dict[str, list], dict[str, Any]]:
    """RL rows, SFT rows (by split) and the filter's statistics."""
    template = with_reasoning(config.template, config.reasoning)
    scores = [listing.teacher_ndcg() for listing in listings]
    kept = [(listing, s) for listing, s in zip(listings, scores) if listing.order is not None and s >= config.alpha]
    val = split_queries([listing.qid for listing, _ in kept], config.val_fraction, config.seed)
    rows: dict[str, list] = {"train": [], "val": []}
    sft: dict[str, list] = {"train": [], "val": []}
    for listing, _ in kept:
        split = "val" if listing.qid in val else "train"
        messages = build_messages(listing.query, listing.candidates, template, budget=config.passage_budget)
        presented = ndcg_at_k([listing.relevant.get(d, 0) for d in listing.ids])
        extra = {"qid": listing.qid, "set_index": listing.index, "docids": list(listing.ids),
                 "set_ndcg10": presented, "pool_ndcg10": presented, "split": split, "index": len(rows[split]),
                 "query": listing.query}
        truth = truth_record(list(listing.ids), list(listing.order or ()), listing.relevant)
        rows[split].append({"data_source": data_source, "prompt": messages, "ability": "rerank",
                            "reward_model": {"style": "rule", "ground_truth": json.dumps(truth)},
                            "extra_info": extra})
        sft[split].append({"prompt": messages, "extra_info": extra, "completion": [
            {"role": "assistant", "content": completion(listing, config.reasoning)}]})
    statuses = Counter(listing.status for listing in listings)
    parsed = [s for listing, s in zip(listings, scores) if listing.order is not None]
    histogram = [0] * BINS
    for s in parsed:
        histogram[min(int(s * BINS), BINS - 1)] += 1
    stats = {
        "settings": asdict(config),
        "lists": len(listings),
        "teacher_status": dict(sorted(statuses.items())),
        "filter": {"alpha": config.alpha, "kept": len(kept),
                   "dropped_unparsed": len(listings) - len(parsed),
                   "dropped_below_alpha": len(parsed) - len(kept),
                   "dropped_no_relevant": sum(not listing.relevant for listing in listings)},
        "teacher_ndcg10": {**{k: round(float(v), 4) for k, v in spread(parsed).items()},
                           "histogram": {f"{i / BINS:.1f}-{(i + 1) / BINS:.1f}": n for i, n in enumerate(histogram)}},
        "kept_ndcg10": {k: round(float(v), 4) for k, v in spread([s for _, s in kept]).items()},
        "rows": {"train": len(rows["train"]), "val": len(rows["val"])},
        "queries": {"train": len({r["extra_info"]["qid"] for r in rows["train"]}),
                    "val": len({r["extra_info"]["qid"] for r in rows["val"]})},
        "reasoning_chars": spread([len(listing.reasoning) for listing, _ in kept]),
    }
    return rows, sft, stats


def render_stats(stats: Mapping[str, Any]) -> str:
    """``stats.md``: the filter's counts and the teacher nDCG@10 distribution."""
    f, t = stats["filter"], stats["teacher_ndcg10"]
    lines = ["# ReasonRank synthesis", "",
             f"- lists: {stats['lists']}; teacher answers: "
             + ", ".join(f"{s} {n}" for s, n in stats["teacher_status"].items()),
             (f"- self-consistency filter (teacher nDCG@10 >= {f['alpha']}): kept {f['kept']}, dropped "
             f"{f['dropped_below_alpha']} below alpha (of which {f['dropped_no_relevant']} without a relevant "
             f"passage) and {f['dropped_unparsed']} not a full permutation"),
             f"- teacher nDCG@10: min {t['min']}, mean {t['mean']}, max {t['max']}",
             (f"- rows: train {stats['rows']['train']} ({stats['queries']['train']} queries), val "
             f"{stats['rows']['val']} ({stats['queries']['val']} queries)"), "",
             "| teacher nDCG@10 | lists |", "|---|---:|",
             *[f"| {label} | {n} |" for label, n in t["histogram"].items()]]
    return "\n".join(lines) + "\n"


def write_outputs(listings: Sequence[Listing], config: ReasonRankConfig, output_dir: str | Path, *,
                  data_source: str, overwrite: bool = False) -> dict[str, Any]:
    """Filter the listings, write the RL and SFT rows and the stats (renamed into place together); the stats."""
    config.check()
    rows, sft, stats = build_rows(listings, config, data_source)
    if not stats["filter"]["kept"]:
        f = stats["filter"]
        raise RearankError(f"no list was kept: {f['dropped_below_alpha']} below --min-teacher-ndcg {config.alpha}, "
                           f"{f['dropped_unparsed']} teacher answers not a full permutation; check the teacher or "
                           "lower the threshold")
    with staged_outputs(output_dir, overwrite) as out:
        for split in ("train", "val"):
            write_parquet(out.path(f"{split}.parquet"), rows[split])
            write_jsonl(out.path(f"sft_{split}.jsonl"), sft[split])
            write_sft_parquet(out.path(f"sft_{split}.parquet"), sft[split])
        stats["outputs"] = sorted([*out.staged, "stats.json", "stats.md"])
        write_text(out.path("stats.md"), render_stats(stats))
        write_text(out.path("stats.json"), json.dumps(stats, indent=2) + "\n")
    return stats


def add_reasonrank_arguments(parser: Any) -> None:
    """The ``--mode reasonrank`` options of ``rearank synth`` (the teacher flags are shared with grouprank-labels)."""
    g = parser.add_argument_group("reasonrank (ReasonRank's teacher lists and self-consistency filter, "
                                  "docs/reasonrank.md)")
    g.add_argument("--min-teacher-ndcg", type=float, default=0.4, metavar="ALPHA",
                   help="keep a list when the nDCG@10 of the teacher's order against its relevant passages is at "
                   "least ALPHA (0.4, the paper's)")
    reads(g.add_argument("--import-reasonrank", metavar="FILE",
                         help="ReasonRank's released training_data_all.jsonl instead of a teacher (texts from --topics "
                         "and --docs)"))


def run_reasonrank(args: Any) -> int:
    """``rearank synth --mode reasonrank``: teacher lists (or the released file), the filter, the rows (the input
    flags were checked by :mod:`data_synthesis.cli`)."""
    from data_synthesis.grouprank_labels import _teacher
    from data_synthesis.writers import check_output_dir
    from rearank.data.packs import load_docs, load_qrels, load_requests, load_topics

    check_output_dir(args.output_dir, args.overwrite)
    config = ReasonRankConfig(
        set_size=args.set_size, samples_per_query=args.samples_per_query, alpha=args.min_teacher_ndcg,
        order=args.order, seed=args.seed, val_fraction=args.val_fraction,
        reasoning=True if args.reasoning is None else args.reasoning, template=args.template or "rearank",
        max_new_tokens=args.teacher_max_tokens,
        passage_budget=None if args.passage_budget is None else str(args.passage_budget))
    config.check()
    try:
        as_budget(config.passage_budget)
    except ValueError as err:
        raise RearankError(str(err)) from None
    with_reasoning(config.template, config.reasoning)  # a template without the asked variant fails now
    if args.import_reasonrank:
        if not args.topics or not args.docs:
            raise RearankError("--import-reasonrank needs --topics and --docs (the texts of its qids and docids)")
        records = [r for _, r in iter_json_lines(args.import_reasonrank)]
        wanted = {str(d) for r in records for d in r.get("initial_list") or ()}
        listings = read_released(args.import_reasonrank, load_topics(args.topics), load_docs(args.docs, wanted))
        source = args.data_source or "reasonrank/released"
    else:
        if not args.teacher:
            raise RearankError("--mode reasonrank needs --teacher BACKEND (openai, vllm, hf, or oracle for mechanics) "
                               "or --import-reasonrank FILE")
        requests = load_requests(dataset=args.dataset, run=args.run, topics=args.topics, docs=args.docs,
                                 top_k=args.top_k, max_queries=args.max_queries, skip_missing=args.skip_missing)
        qrels = load_qrels(args.qrels or args.dataset)
        teacher = _teacher(args.teacher, args.teacher_model, qrels, ListwiseFormat())
        try:
            listings = teacher_listings(draw_lists(requests, qrels, config, args.top_k), qrels, teacher, config)
        finally:
            teacher.close()
        source = args.data_source or f"reasonrank/{args.dataset or Path(args.run).name.split('.')[0]}"
    stats = write_outputs(listings, config, args.output_dir, data_source=source, overwrite=args.overwrite)
    f, t = stats["filter"], stats["teacher_ndcg10"]
    print(f"lists: {stats['lists']}; kept {f['kept']} (teacher nDCG@10 >= {f['alpha']}), dropped "
          f"{f['dropped_below_alpha']} below it and {f['dropped_unparsed']} unparsed; teacher nDCG@10 mean {t['mean']};"
          f" rows: train {stats['rows']['train']}, val {stats['rows']['val']}; wrote {', '.join(stats['outputs'])} "
          f"to {args.output_dir}")
    return 0
