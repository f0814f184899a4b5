"""The pointwise card: the :class:`Pointwise` method, each passage scored on its own (by the ``scorer`` backend
unless ``--backend`` says otherwise); RRPO's reader prompt (``rrpo``, a ``plain`` prompt file
whose reader feedback trains a pointwise scorer) and RRPO's published figures live in its folder."""

from pathlib import Path

from rearank.methods.card import RANK, Card
from rearank.methods.pointwise.figures import TABLE1
from rearank.methods.pointwise.method import Pointwise


def _oracle(labels, top_grade: int = 1) -> str:
    return str(labels[0])


CARD = Card(name="pointwise", kind=RANK, folder=Path(__file__).resolve().parent, method=Pointwise, backend="scorer",
            templates={"rrpo": "rrpo.yaml"}, oracle=_oracle, published=TABLE1)
