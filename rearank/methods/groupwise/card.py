"""The groupwise (GroupRank) card: the :class:`Groupwise` method and its presets."""

from pathlib import Path

from rearank.methods.card import RANK, Card, Examples, TemplateSets
from rearank.methods.groupwise.examples import groupwise
from rearank.methods.groupwise.figures import GROUPRANK_7B, GROUPRANK_32B
from rearank.methods.groupwise.method import Groupwise
from rearank.methods.groupwise.oracle import oracle_answer
from rearank.methods.groupwise.parser import scores_grammar
from rearank.methods.groupwise.presets import PRESETS
from rearank.methods.groupwise.prompt import sft_target

CARD = Card(
    name="groupwise", kind=RANK, folder=Path(__file__).resolve().parent, method=Groupwise, presets=PRESETS,
    templates={"grouprank": "grouprank.yaml", "grouprank-answer": "grouprank-answer.yaml",
               "grouprank-released": "grouprank-released.yaml",
               "grouprank-released-answer": "grouprank-released-answer.yaml"},
    grammar=scores_grammar, reward=("pkg://rearank.methods.groupwise.reward", "compute_score"), oracle=oracle_answer,
    examples=Examples(groupwise, "labels"), synth="sets", template_sets=TemplateSets(sft_target), ability="rerank",
    checkpoints=(GROUPRANK_7B, GROUPRANK_32B),
)
