"""The groupwise (GroupRank) card."""

from pathlib import Path

from rearank.methods.card import RANK, Card, Examples
from rearank.methods.groupwise.examples import groupwise
from rearank.methods.groupwise.figures import GROUPRANK_7B, GROUPRANK_32B
from rearank.methods.groupwise.oracle import oracle_answer
from rearank.methods.groupwise.parser import scores_grammar

CARD = Card(
    name="groupwise", kind=RANK, folder=Path(__file__).resolve().parent,
    templates={"grouprank": "grouprank.yaml", "grouprank-answer": "grouprank-answer.yaml",
               "grouprank-released": "grouprank-released.yaml",
               "grouprank-released-answer": "grouprank-released-answer.yaml"},
    grammar=scores_grammar, reward=("pkg://rearank.methods.groupwise.reward", "compute_score"), oracle=oracle_answer,
    examples=Examples(groupwise, "labels"), synth="sets", ability="rerank",
    checkpoints=(GROUPRANK_7B, GROUPRANK_32B),
)
