"""The plain reader format: a reader answers a question from numbered passages in a few words (``plain``), or
from one user turn per passage after a one-shot example (RRPO's layout, ``rrpo``, in :mod:`rearank.methods.pointwise`).
Its card is :data:`rearank.methods.plain.card.CARD`."""
