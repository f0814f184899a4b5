"""The one answering rule of rearank's QA oracles: the ``gold`` / ``noisy-gold`` readers
(:mod:`rearank.rag.readers`) and the served ``qa-oracle`` backend (:mod:`rearank.backends.qa_oracle`) both call
:func:`oracle_answer`, so a reader in ``rag eval`` and a reader behind ``python -m rearank.backends.chat_server``
cannot drift.

The gold evidence of an item is its supporting passages and its has-answer passages (DPR); the *share* is the part
of it in the context. ``require`` says how the share turns into a right answer:

* ``any``: right with probability ``p`` when some gold evidence is shown (share > 0);
* ``all``: right with probability ``p`` when every supporting passage is shown (items without supporting labels:
  every has-answer passage);
* ``share``: right with probability ``p * share``.

An item with no gold evidence known is never answered right. The draw is a ``coin`` in [0, 1) that the caller
derives from a seed (:func:`coin`), so the same context and seed always give the same answer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from rearank.types import QAItem

WRONG_ANSWER = "unanswerable"  # matches no gold answer (unlike "no answer", which Hits "no")
REQUIRES = ("any", "all", "share")


def gold_share(item: QAItem, shown: Iterable[str], require: str = "any") -> float:
    """Share of the item's gold evidence among the ``shown`` passage ids (0.0 when none is known)."""
    has_answer = {p.pid for p in item.passages if p.has_answer}
    gold = item.supporting if require == "all" and item.supporting else item.supporting | has_answer
    return len(gold & set(shown)) / len(gold) if gold else 0.0


def coin(*parts: object) -> float:
    """A uniform draw in [0, 1) fixed by ``parts`` (a seed, a question id, the context ...)."""
    blob = "\x1f".join(str(part) for part in parts).encode("utf-8")
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big") / 2**64


def oracle_answer(item: QAItem, shown: Iterable[str], *, require: str = "any", p: float = 1.0,
                  draw: float = 0.0, wrong_answer: str = WRONG_ANSWER) -> str:
    """The item's first gold answer when the oracle is right with the passages ``shown``, else ``wrong_answer``."""
    if require not in REQUIRES:
        raise ValueError(f"oracle: require must be one of {', '.join(REQUIRES)}; got {require!r}")
    share = gold_share(item, shown, require)
    if require == "share":
        right = draw < p * share
    else:
        right = share >= 1.0 if require == "all" else share > 0.0
        right = right and draw < p
    return item.answers[0] if right and item.answers else wrong_answer
