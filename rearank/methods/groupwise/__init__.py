"""Groupwise reranking (GroupRank): a group of documents scored jointly, 0-10 per document, as JSON.

The method is :class:`Groupwise` (:mod:`.method`, ``rearank rerank --method groupwise``); beside it its answer
format and training pieces: the parser (:mod:`.parser`), the oracle answer (:mod:`.oracle`), the prompt and SFT
target (:mod:`.prompt`, templates ``grouprank.yaml`` and ``grouprank-released.yaml``), the paper's presets
(:mod:`.presets`), the teacher labels (:mod:`.labels`) and the verl reward (:mod:`.reward`;
recipes give verl ``pkg://rearank.methods.groupwise.reward``). See docs/grouprank.md.
"""

from rearank.methods.groupwise.method import (
    FALLBACKS,
    FUSIONS,
    Group,
    GroupState,
    Groupwise,
    check_group_settings,
    fallback_scores,
    min_max,
    partition,
    sliding_groups,
)
from rearank.methods.groupwise.oracle import oracle_answer
from rearank.methods.groupwise.parser import STATUSES, ParsedScores, format_scores, parse_scores
from rearank.methods.groupwise.prompt import GROUPRANK_TEMPLATE, build_group_messages, load_group_template

__all__ = [
    "FALLBACKS",
    "FUSIONS",
    "GROUPRANK_TEMPLATE",
    "STATUSES",
    "Group",
    "GroupState",
    "Groupwise",
    "ParsedScores",
    "build_group_messages",
    "check_group_settings",
    "fallback_scores",
    "format_scores",
    "load_group_template",
    "min_max",
    "oracle_answer",
    "parse_scores",
    "partition",
    "sliding_groups",
]
