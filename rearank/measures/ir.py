"""Retrieval metrics with trec_eval semantics (through ir-measures / pytrec_eval), keyed by trec_eval names.

Measures may be named the trec_eval way (``ndcg_cut.10``, ``ndcg_cut_10``, ``recall.100``, ``map``,
``recip_rank``, ``P.5``) or the ir-measures way (``nDCG@10``, ``R@100``, ``AP@100``, ``RR@10``, ``P@5``).
Averages are over every judged query, those missing from the run counting 0 (``trec_eval -c``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import ir_measures

from rearank.errors import RearankError

DEFAULT_MEASURE_NAMES = ("ndcg_cut.1", "ndcg_cut.5", "ndcg_cut.10", "recall.100", "map_cut.100")

# ir-measures measure name -> (trec_eval name without a cutoff, trec_eval name prefix with one)
_TREC_NAMES = {
    "nDCG": ("ndcg", "ndcg_cut_"),
    "AP": ("map", "map_cut_"),
    "R": (None, "recall_"),
    "P": (None, "P_"),
    "RR": ("recip_rank", None),
    "Rprec": ("Rprec", None),
    "Bpref": ("bpref", None),
    "Success": (None, "success_"),
    "infAP": ("infAP", None),
    "NumRet": ("num_ret", None),
    "NumRel": ("num_rel", None),
}


def parse_measures(names: Iterable[str]) -> list:
    """Parse measure names (trec_eval or ir-measures style, comma lists allowed) into ir-measures measures."""
    measures = []
    for name in names:
        for part in filter(None, (p.strip() for p in _split_outside_parens(name))):
            measures.extend(_parse_one(part))
    if not measures:
        raise RearankError("no measure given")
    return list(dict.fromkeys(measures))


def _split_outside_parens(text: str) -> list[str]:
    """Split on commas outside ``(...)``; a part that is only digits continues a trec_eval list (``ndcg_cut.1,5``)."""
    parts: list[str] = []
    depth, current = 0, ""
    for ch in text:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth <= 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    merged: list[str] = []
    for part in parts:
        if merged and part.strip().isdigit():
            merged[-1] += "," + part.strip()
        else:
            merged.append(part)
    return merged


def _parse_one(name: str) -> list:
    if "@" in name or "(" in name:
        parsers = (lambda n: [ir_measures.parse_measure(n)],)
    else:
        parsers = (ir_measures.parse_trec_measure, lambda n: [ir_measures.parse_measure(n)])
    for parse in parsers:
        try:
            measures = list(parse(name))
        except (ValueError, NameError, KeyError, TypeError, AttributeError, SyntaxError):
            continue
        for measure in measures:  # pytrec_eval aborts the interpreter on a cutoff of 0
            cutoff = dict(measure.params).get("cutoff")
            if cutoff is not None and (not isinstance(cutoff, int) or cutoff < 1):
                raise RearankError(f"measure {name!r}: the cutoff must be a whole number of at least 1, got {cutoff}")
        return measures
    raise RearankError(
        f"unknown measure {name!r}; use trec_eval names (ndcg_cut.10, recall.100, map_cut.100, map, recip_rank, "
        "P.10) or ir-measures names (nDCG@10, R@100, AP@100, RR@10, P@10)"
    )


def trec_name(measure) -> str:
    """The trec_eval output name of a measure (``ndcg_cut_10``), or its ir-measures name if trec_eval has none."""
    params = dict(measure.params)
    cutoff = params.pop("cutoff", None)
    plain, prefix = _TREC_NAMES.get(measure.NAME, (None, None))
    if not params:
        if cutoff is None and plain:
            return plain
        if cutoff is not None and prefix:
            return f"{prefix}{cutoff}"
    return str(measure)


DEFAULT_MEASURES = tuple(parse_measures(DEFAULT_MEASURE_NAMES))


@dataclass(frozen=True)
class Evaluation:
    """Mean of each measure over the judged queries (``aggregate``) and each query's values (``per_query``).

    Keys are trec_eval names (``ndcg_cut_10``). ``missing`` lists judged queries absent from the run
    (scored 0); ``unjudged`` counts run queries without judgments (ignored, as trec_eval does).
    """

    aggregate: dict[str, float]
    per_query: dict[str, dict[str, float]]
    missing: tuple[str, ...] = ()
    unjudged: int = 0


RunLike = Mapping[str, Sequence[tuple[str, float]]] | Mapping[str, Mapping[str, float]]


def evaluate(
    qrels: Mapping[str, Mapping[str, int]],
    run: RunLike,
    measures: Iterable = DEFAULT_MEASURES,
) -> Evaluation:
    """Evaluate a run against qrels with trec_eval semantics (``-c``: judged queries absent from the run count 0).

    ``run`` maps qid to ``[(docid, score)]`` (or ``{docid: score}``); ranks come from the scores (descending,
    ties by docid descending), exactly as trec_eval ranks them. ``measures`` are ir-measures objects or names.
    """
    measures = [p for m in measures for p in (parse_measures([m]) if isinstance(m, str) else [m])]
    names = {m: trec_name(m) for m in measures}
    qrels = {str(q): {str(d): int(r) for d, r in judged.items()} for q, judged in qrels.items()}
    if not qrels:
        raise RearankError("the qrels hold no judgments")
    scored = {str(q): dict(ranked) for q, ranked in run.items()}
    judged_run = {q: {d: float(s) for d, s in ranked.items()} for q, ranked in scored.items() if q in qrels and ranked}
    per_query: dict[str, dict[str, float]] = {q: dict.fromkeys(names.values(), 0.0) for q in qrels}
    if judged_run:
        for metric in ir_measures.iter_calc(measures, qrels, judged_run):
            per_query[metric.query_id][names[metric.measure]] = float(metric.value)
    count = len(per_query)
    aggregate = {name: sum(values[name] for values in per_query.values()) / count for name in names.values()}
    return Evaluation(
        aggregate=aggregate,
        per_query=per_query,
        missing=tuple(q for q in qrels if q not in judged_run),
        unjudged=sum(1 for q in scored if q not in qrels),
    )

