"""The cards of listwise reranking (Rearank, RankGPT templates) and of ReasonRank's reward and rows beside it, with
their checkpoints' published figures."""

from pathlib import Path

from rearank.grammar import id_list_answer
from rearank.methods.card import RANK, Card, Examples
from rearank.methods.listwise.answer import ideal_answer
from rearank.methods.listwise.examples import expected_from_truth, from_truth, reasonrank
from rearank.methods.listwise.figures import RANKZEPHYR_7B, REARANK_7B, REASONRANK_7B


def _oracle(labels, top_grade: int = 1) -> str:
    return ideal_answer(labels)


FOLDER = Path(__file__).resolve().parent
LISTWISE = Card(
    name="listwise", kind=RANK, folder=FOLDER,
    templates={"rearank": "rearank.yaml", "rearank-answer": "rearank-answer.yaml", "rankgpt": "rankgpt.yaml"},
    grammar=lambda n: id_list_answer(n, reasoning=True, tags=True),
    reward=("pkg://rearank.methods.listwise.reward", "compute_score"), oracle=_oracle,
    examples=Examples(from_truth, "ideal", expected_from_truth), synth="sets", ability="rerank",
    checkpoints=(REARANK_7B, RANKZEPHYR_7B),
)
REASONRANK = Card(
    name="reasonrank", kind=RANK, folder=FOLDER, grammar=LISTWISE.grammar,
    reward=("pkg://rearank.methods.listwise.reasonrank", "compute_score"), oracle=_oracle,
    examples=Examples(reasonrank, "best"), synth="teacher", ability="rerank", checkpoints=(REASONRANK_7B,),
)
