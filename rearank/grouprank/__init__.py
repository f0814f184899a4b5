"""GroupRank's answer format: a group of documents scored jointly, 0-10 per document, as JSON.

The method that reranks with it is :class:`rearank.methods.Groupwise` (``rearank rerank --mode groupwise``).
Here: parsing (:func:`parse_scores`), the oracle answer (:func:`oracle_answer`), training data
(:func:`build_group_messages`, :func:`load_group_template`, :func:`rearank.grouprank.prompt.sft_target`); the verl
reward is :mod:`rearank.grouprank.reward` (give verl ``pkg://rearank.grouprank.reward``; it is not imported here).
See docs/grouprank.md.
"""

from rearank.grouprank.oracle import oracle_answer
from rearank.grouprank.parser import STATUSES, ParsedScores, format_scores, parse_scores
from rearank.grouprank.prompt import GROUPRANK_TEMPLATE, build_group_messages, load_group_template

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
