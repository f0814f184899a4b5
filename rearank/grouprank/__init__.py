"""Groupwise reranking (GroupRank): a group of documents scored jointly, 0-10 per document, as JSON.

Inference: :class:`GroupReranker` (``rearank rerank --mode groupwise``). Parsing: :func:`parse_scores`.
Training: :func:`build_group_messages` and :func:`group_ground_truth` for data synthesis, and the verl reward
in :mod:`rearank.grouprank.reward` (import it by file path in verl; it is not imported here).
"""

from rearank.grouprank.oracle import GroupOracleBackend
from rearank.grouprank.parser import STATUSES, ParsedScores, format_scores, parse_scores
from rearank.grouprank.prompt import GROUPRANK_TEMPLATE, build_group_messages, load_group_template
from rearank.grouprank.ranker import FALLBACKS, GroupReranker

__all__ = [
    "FALLBACKS",
    "GROUPRANK_TEMPLATE",
    "STATUSES",
    "GroupOracleBackend",
    "GroupReranker",
    "ParsedScores",
    "build_group_messages",
    "format_scores",
    "load_group_template",
    "parse_scores",
]
