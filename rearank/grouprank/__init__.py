"""Groupwise reranking (GroupRank): a group of documents scored jointly, 0-10 per document, as JSON.

Inference: :class:`GroupReranker` (``rearank rerank --mode groupwise``), :class:`GroupOracleBackend`.
Parsing: :func:`parse_scores`. Training data: :func:`build_group_messages`, :func:`load_group_template` and
:func:`rearank.grouprank.prompt.sft_target`; the verl reward is :mod:`rearank.grouprank.reward` (give verl
``pkg://rearank.grouprank.reward``; it is not imported here). See docs/grouprank.md.
"""

from rearank.grouprank.oracle import GroupOracleBackend
from rearank.grouprank.parser import STATUSES, ParsedScores, format_scores, parse_scores
from rearank.grouprank.prompt import GROUPRANK_TEMPLATE, build_group_messages, load_group_template
from rearank.grouprank.ranker import FALLBACKS, GroupReranker, check_group_settings

__all__ = [
    "FALLBACKS",
    "GROUPRANK_TEMPLATE",
    "STATUSES",
    "GroupOracleBackend",
    "GroupReranker",
    "ParsedScores",
    "build_group_messages",
    "check_group_settings",
    "format_scores",
    "load_group_template",
    "parse_scores",
]
