"""GroupRank's teacher-labelled training data (paper §IV-A, Fig. 2): ``rearank synth --mode grouprank-labels``.

Per query: the hybrid first stage (the pack's BM25 run and a second run, min-max normalised and fused, Eq. 5)
keeps the top ``pool_size`` (50); a pointwise teacher scores each of them 0-10 and a listwise teacher orders all
of them; ``S_gt`` fuses both (Eq. 6, :mod:`rearank.methods.groupwise.labels`). Each query's teacher answers go to
``teacher_traces.jsonl`` in the output folder as soon as the query is done (a rerun resumes after the last
finished query; the settings must match). Then groups are drawn from the pool like the Rearank sets
(:func:`data_synthesis.sampling.draw_sets`) and written as groupwise verl rows whose ground truth is ``S_gt``,
and SFT rows whose ``<reason>`` is the teachers' own rationale.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from data_synthesis.sampling import draw_sets, split_queries
from data_synthesis.writers import RL_SCHEMA, staged_outputs, write_jsonl, write_parquet, write_text
from rearank.backends.base import Backend, Prompt, SamplingSettings
from rearank.errors import RearankError
from rearank.io.jsonl_log import JsonlAppender, read_jsonl_log
from rearank.io.outputs import reads
from rearank.measures.ndcg import ndcg_at_k
from rearank.methods.groupwise.labels import fused_labels, parse_point_score, point_rationale, top_hybrid
from rearank.methods.groupwise.parser import format_scores, label_scores
from rearank.methods.groupwise.prompt import build_group_messages
from rearank.methods.listwise.answer import ideal_answer, parse_answer
from rearank.prompts import build_messages
from rearank.types import Candidate, Request

TRACES = "teacher_traces.jsonl"

#: The pointwise teacher's instruction (ours, after the paper's pointwise labelling prompt: usefulness and
#: relevance, 0-10, a fixed verdict line); unlike the paper's, it asks for one sentence of reasoning first, which
#: becomes the SFT rows' rationale.
POINT_SYSTEM = (
    "You judge how useful a document is for answering a search query. A useful document helps answer the query "
    "directly; one that only mentions the topic is not useful."
)
POINT_USER = (
    "Query: {query}\n\nDocument: {passage}\n\nIn one or two sentences say what in the document helps answer the "
    "query (or that nothing does). Then end with the line 'Relevance score: X.' where X is an integer from 0 "
    "(no help at all) to 10 (answers the query fully)."
)


class PointwiseFormat:
    """The oracle's answer to a pointwise teacher prompt: the judged grade and its score on the 0-10 scale."""

    def answer_text(self, labels: Sequence[int], top_grade: int = 1) -> str:
        grade = labels[0] if labels else 0
        return f"The judged grade is {grade} of {top_grade}.\nRelevance score: {label_scores([grade], top_grade)[0]}."


class ListwiseFormat:
    """The oracle's answer to the listwise teacher prompt: the judged order, in the reasoning format."""

    def answer_text(self, labels: Sequence[int], top_grade: int = 1) -> str:
        return ideal_answer(labels)


@dataclass(frozen=True)
class LabelConfig:
    """Settings of the label synthesis; all but ``retries`` and ``val_fraction`` are checked on resume."""

    fusion_weight: float = 0.5   # paper: 0.5 / 0.5 (Eq. 5)
    pool_size: int = 50          # paper: top 50
    alpha: float = 0.5           # paper: 0.5 (Eq. 6)
    set_size: int = 20           # groups of 20 (paper's inference group)
    samples_per_query: int = 5   # ours: groups drawn per query from the pool
    seed: int = 0
    val_fraction: float = 0.1
    retries: int = 2             # ours: extra attempts for a teacher answer that does not parse
    template: str = "grouprank"
    list_template: str = "rearank"
    max_new_tokens: int = 2048
    temperature: float = 0.0

    def check(self) -> None:
        if not 0.0 <= self.fusion_weight <= 1.0 or not 0.0 <= self.alpha <= 1.0:
            raise RearankError("--fusion-weight and --alpha must be in [0, 1]")
        if self.pool_size < 2 or self.set_size < 2 or self.samples_per_query < 1 or self.retries < 0:
            raise RearankError("--pool-size and --set-size must be at least 2, --samples-per-query at least 1")

    def resume_key(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k not in ("retries", "val_fraction")}


def hybrid_pool(request: Request, second: Mapping[str, float], texts: Mapping[str, tuple[str, str]],
                config: LabelConfig) -> tuple[list[Candidate], int]:
    """The top ``pool_size`` candidates by Eq. 5, and how many fused documents had no text (dropped)."""
    first = {c.docid: c.score for c in request.candidates}
    known = {c.docid: c for c in request.candidates}
    fused = top_hybrid(first, second, config.fusion_weight, len(first) + len(second))
    pool, dropped = [], 0
    for docid, score in fused:
        if len(pool) == config.pool_size:
            break
        if docid in known:
            pool.append(replace(known[docid], score=score))
        elif docid in texts:
            title, text = texts[docid]
            pool.append(Candidate(docid=docid, score=score, text=text, title=title))
        else:
            dropped += 1
    return pool, dropped


def _generate(backend: Backend, prompts: list[Prompt], settings: SamplingSettings) -> list[str]:
    return [g.text for g in backend.generate(prompts, settings)]


def annotate(request: Request, pool: list[Candidate], point: Backend, listwise: Backend, config: LabelConfig
             ) -> dict[str, Any]:
    """Ask both teachers about one query's pool; the trace record (``dropped`` set when a teacher never parsed)."""
    qid, query = request.query.qid, request.query.text
    settings = SamplingSettings(max_new_tokens=config.max_new_tokens, temperature=config.temperature)
    docids = [c.docid for c in pool]
    point_raw: list[list[str]] = [[] for _ in pool]
    scores: list[float | None] = [None] * len(pool)
    failures = Counter()
    todo = list(range(len(pool)))
    for _attempt in range(config.retries + 1):
        if not todo:
            break
        prompts = [Prompt(messages=({"role": "system", "content": POINT_SYSTEM}, {
            "role": "user", "content": POINT_USER.format(query=query, passage=pool[i].text)}), qid=qid,
            docids=(pool[i].docid,)) for i in todo]
        for i, text in zip(todo, _generate(point, prompts, settings)):
            point_raw[i].append(text)
            scores[i] = parse_point_score(text)
            failures["pointwise"] += scores[i] is None
        todo = [i for i in todo if scores[i] is None]
    list_raw: list[str] = []
    ranks: list[int] | None = None
    messages = tuple(build_messages(query, pool, config.list_template))
    for _attempt in range(config.retries + 1):
        text = _generate(listwise, [Prompt(messages=messages, qid=qid, docids=tuple(docids))], settings)[0]
        list_raw.append(text)
        parsed = parse_answer(text, len(pool))
        if parsed.status == "ok":
            ranks = [0] * len(pool)
            for rank, i in enumerate(parsed.permutation, start=1):
                ranks[i] = rank
            break
        failures["listwise"] += 1
    record: dict[str, Any] = {
        "qid": qid, "query": query, "docids": docids, "texts": [c.text for c in pool],
        "titles": [c.title for c in pool],
        "hybrid": [c.score for c in pool], "point_raw": point_raw, "list_raw": list_raw,
        "point": scores, "ranks": ranks, "failures": dict(failures),
        "dropped": bool(todo) or ranks is None,
    }
    if not record["dropped"]:
        record["s_gt"] = fused_labels(scores, ranks, config.alpha)
    return record


def _check_record(record: dict) -> None:
    if "settings" not in record:
        for key in ("qid", "docids", "point", "ranks", "dropped"):
            record[key]  # a KeyError marks a record of the wrong shape


def load_traces(path: Path, config: LabelConfig) -> list[dict]:
    """The finished queries of an earlier run (settings must match ``config``); writes the header when new."""
    records = read_jsonl_log(path, _check_record, "teacher trace", f"remove {path} to start the labels afresh")
    if not records:
        with JsonlAppender(path) as log:
            log.write({"settings": config.resume_key()})
        return []
    if records[0].get("settings") != config.resume_key():
        raise RearankError(f"{path} was written with other settings ({records[0].get('settings')}); use the same "
                           "options to resume, or another --output-dir")
    return records[1:]


def group_reason(record: Mapping[str, Any], positions: Sequence[int]) -> str:
    """The teachers' rationale for one group, renumbered to the group: the pointwise teacher's words on each
    document and the listwise teacher's rank of it."""
    lines = []
    for j, p in enumerate(positions, start=1):
        said = point_rationale(record["point_raw"][p][-1]) or "no reasoning given"
        lines.append(f"[{j}] {said} (listwise rank {record['ranks'][p]} of {len(record['docids'])}).")
    return "\n".join(lines)


def label_rows(records: Sequence[Mapping[str, Any]], config: LabelConfig, data_source: str
               ) -> tuple[dict[str, list], dict[str, list], Counter]:
    """verl RL rows (ground truth ``{"labels": S_gt of the group, "pool": S_gt of the pool}``) and SFT rows."""
    kept = [r for r in records if not r["dropped"]]
    val = split_queries([r["qid"] for r in kept], config.val_fraction, config.seed)
    rows: dict[str, list] = {"train": [], "val": []}
    sft: dict[str, list] = {"train": [], "val": []}
    counts = Counter()
    for record in kept:
        split = "val" if record["qid"] in val else "train"
        n = len(record["docids"])
        sets = draw_sets(record["qid"], n, min(config.set_size, n), config.samples_per_query, config.seed, "shuffle")
        for index, positions in enumerate(sets.sets):
            labels = [record["s_gt"][p] for p in positions]
            passages = [Candidate(record["docids"][p], 0.0, record["texts"][p], record["titles"][p]) for p in positions]
            messages = build_group_messages(record["query"], passages, config.template)
            extra = {
                "qid": record["qid"], "set_index": index, "docids": [record["docids"][p] for p in positions],
                "set_ndcg10": ndcg_at_k(labels), "pool_ndcg10": ndcg_at_k(record["s_gt"]), "split": split,
                "index": len(rows[split]), "query": record["query"],
            }
            truth = {"labels": labels, "pool": record["s_gt"]}
            rows[split].append({"data_source": data_source, "prompt": messages, "ability": "rerank",
                                "reward_model": {"style": "rule", "ground_truth": json.dumps(truth)},
                                "extra_info": extra})
            answer = format_scores(label_scores(labels, 1.0))
            target = f"<reason>\n{group_reason(record, positions)}\n</reason>\n<answer>{answer}</answer>"
            sft[split].append({"prompt": messages, "completion": [{"role": "assistant", "content": target}],
                               "extra_info": extra})
            counts[f"{split}_rows"] += 1
    return rows, sft, counts


def write_sft_parquet(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """SFT rows for verl's SFT trainer (``data.messages_key: messages``): the prompt turns then the target."""
    table = pa.Table.from_pylist(
        [{"messages": [*r["prompt"], *r["completion"]], "qid": r["extra_info"]["qid"]} for r in rows],
        schema=pa.schema([("messages", RL_SCHEMA.field("prompt").type), ("qid", pa.string())]))
    pq.write_table(table, path)


def synthesize_labels(
    requests: Sequence[Request],
    second: Mapping[str, Mapping[str, float]],
    texts: Mapping[str, tuple[str, str]],
    point: Backend,
    listwise: Backend,
    output_dir: str | Path,
    config: LabelConfig,
    *,
    data_source: str,
    overwrite: bool = False,
    progress: bool = True,
) -> dict[str, Any]:
    """Annotate every query not yet in the traces, then write the rows and stats; return the stats."""
    config.check()
    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    traces = folder / TRACES
    records = load_traces(traces, config)
    done = {r["qid"] for r in records}
    no_second = 0
    with JsonlAppender(traces) as log:
        for request in tqdm(requests, desc="teachers", unit="query", disable=not progress, dynamic_ncols=True):
            if request.query.qid in done:
                continue
            if request.query.qid not in second:
                no_second += 1
            pool, no_text = hybrid_pool(request, second.get(request.query.qid, {}), texts, config)
            record = annotate(request, pool, point, listwise, config)
            record["no_text"] = no_text
            log.write(record)
            records.append(record)
    wanted = {r.query.qid for r in requests}
    records = [r for r in records if r["qid"] in wanted]
    rows, sft, counts = label_rows(records, config, data_source)
    if not rows["train"] and not rows["val"]:
        raise RearankError(f"no query kept: the teachers' answers of all {len(records)} queries failed to parse "
                           f"(see {traces})")
    failures = Counter()
    for r in records:
        failures.update(r["failures"])
    s_gt = [v for r in records if not r["dropped"] for v in r["s_gt"]]
    stats = {
        "settings": asdict(config),
        "queries": {"in": len(requests), "annotated": len(records), "dropped": sum(r["dropped"] for r in records),
                    "without_second_run": no_second},
        "teacher_parse_failures": {"pointwise": failures["pointwise"], "listwise": failures["listwise"]},
        "docs_without_text": sum(r.get("no_text", 0) for r in records),
        "rows": {"train": counts["train_rows"], "val": counts["val_rows"]},
        "s_gt": {"min": min(s_gt), "max": max(s_gt), "mean": sum(s_gt) / len(s_gt)},
    }
    with staged_outputs(folder, overwrite) as out:
        for split in ("train", "val"):
            write_parquet(out.path(f"{split}.parquet"), rows[split])
            write_jsonl(out.path(f"sft_{split}.jsonl"), sft[split])
            write_sft_parquet(out.path(f"sft_{split}.parquet"), sft[split])
        stats["outputs"] = sorted([*out.staged, "stats.json"])
        write_text(out.path("stats.json"), json.dumps(stats, indent=2) + "\n")
    return stats


def add_label_arguments(parser: Any) -> None:
    """The ``--mode grouprank-labels`` options of ``rearank synth``."""
    g = parser.add_argument_group("grouprank-labels (GroupRank's teacher labels, docs/grouprank.md)")
    reads(g.add_argument("--second-run", metavar="FILE",
                         help="TREC run fused with the pack's BM25 run (e.g. a dense retriever's), min-max normalised"))
    g.add_argument("--fusion-weight", type=float, default=0.5, metavar="W",
                   help="hybrid score = W * norm(BM25) + (1 - W) * norm(second run) (0.5, the paper's Eq. 5)")
    g.add_argument("--pool-size", type=int, default=50, metavar="N", help="hybrid candidates annotated per query (50)")
    g.add_argument("--alpha", type=float, default=0.5,
                   help="S_gt = alpha * norm(pointwise) + (1 - alpha) * norm(-log listwise rank) (0.5, Eq. 6)")
    g.add_argument("--teacher", metavar="BACKEND", help="backend of the pointwise teacher (openai, vllm, hf, oracle)")
    g.add_argument("--teacher-model", metavar="M", help="its model (served name for openai; none for the oracle)")
    g.add_argument("--list-teacher", metavar="BACKEND", help="backend of the listwise teacher (default: --teacher)")
    g.add_argument("--list-teacher-model", metavar="M", help="its model (default: --teacher-model)")
    g.add_argument("--teacher-retries", type=int, default=2, metavar="N",
                   help="re-ask a teacher whose answer does not parse up to N times, then drop the query (2)")
    g.add_argument("--teacher-max-tokens", type=int, default=2048, metavar="N", help="teacher answer length (2048)")
    g.add_argument("--max-queries", type=int, metavar="N", help="only the first N queries of the pack's run")


def _teacher(name: str, model: str | None, qrels: Mapping[str, Mapping[str, int]], answer_format: Any) -> Backend:
    from rearank.backends.registry import make_backend

    options = {"qrels": qrels} if name == "oracle" else {}
    return make_backend(name, model, **options).answer_format(answer_format)


def run_labels(args: Any) -> int:
    """``rearank synth --mode grouprank-labels``: load the pack, the second run and the teachers, then label."""
    from rearank.data.packs import load_docs, load_qrels, load_requests, resolve
    from rearank.io.trec import read_run

    if not args.dataset or not args.second_run or not args.teacher:
        raise RearankError("--mode grouprank-labels needs --dataset, --second-run and --teacher")
    if not Path(args.second_run).is_file():
        raise RearankError(f"--second-run file not found: {args.second_run}")
    config = LabelConfig(
        fusion_weight=args.fusion_weight, pool_size=args.pool_size, alpha=args.alpha, set_size=args.set_size,
        samples_per_query=args.samples_per_query, seed=args.seed, val_fraction=args.val_fraction,
        retries=args.teacher_retries, template=args.template or "grouprank", max_new_tokens=args.teacher_max_tokens,
    )
    config.check()
    requests = load_requests(dataset=args.dataset, top_k=args.top_k, max_queries=args.max_queries,
                             skip_missing=args.skip_missing)
    second = {qid: dict(ranked) for qid, ranked in read_run(args.second_run).items()}
    known = {c.docid for r in requests for c in r.candidates}
    extra = {d for r in requests for d in second.get(r.query.qid, {}) if d not in known}
    texts = load_docs(resolve(args.dataset).docs, extra) if extra else {}
    qrels = load_qrels(args.qrels or args.dataset)
    point = _teacher(args.teacher, args.teacher_model, qrels, PointwiseFormat())
    listwise = _teacher(args.list_teacher or args.teacher, args.list_teacher_model or args.teacher_model, qrels,
                        ListwiseFormat())
    try:
        stats = synthesize_labels(requests, second, texts, point, listwise, args.output_dir, config,
                                  data_source=args.data_source or f"grouprank/{args.dataset}",
                                  overwrite=args.overwrite, progress=not args.quiet)
    finally:
        point.close()
        listwise.close()
    q, f = stats["queries"], stats["teacher_parse_failures"]
    print(f"queries: {q['annotated']} annotated, {q['dropped']} dropped (teacher parse failures: pointwise "
          f"{f['pointwise']}, listwise {f['listwise']}); rows: train {stats['rows']['train']}, val "
          f"{stats['rows']['val']}; wrote {', '.join(stats['outputs'])} and {TRACES} to {args.output_dir}")
    return 0
