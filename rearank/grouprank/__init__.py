"""Moved to :mod:`rearank.methods.groupwise`; ``rearank.grouprank`` and its modules stay aliases of those."""

from rearank.methods.groupwise.oracle import oracle_answer
from rearank.methods.groupwise.parser import STATUSES, ParsedScores, format_scores, parse_scores
from rearank.methods.groupwise.prompt import GROUPRANK_TEMPLATE, build_group_messages, load_group_template

__all__ = [
    "GROUPRANK_TEMPLATE",
    "STATUSES",
    "ParsedScores",
    "build_group_messages",
    "format_scores",
    "load_group_template",
    "oracle_answer",
    "parse_scores",
]
