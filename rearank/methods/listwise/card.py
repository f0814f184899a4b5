"""The cards of listwise reranking (the :class:`Listwise` method, Rearank and RankGPT templates) and of ReasonRank's
reward and rows beside it (a training format the listwise method runs), with their checkpoints' published figures."""

from pathlib import Path

from rearank.grammar import id_list_answer
from rearank.methods.card import RANK, Card, Examples, TemplateSets
from rearank.methods.listwise.answer import ideal_answer, sft_target
from rearank.methods.listwise.examples import expected_from_truth, from_truth, reasonrank
from rearank.methods.listwise.figures import RANKZEPHYR_7B, REARANK_7B, REASONRANK_7B
from rearank.methods.listwise.method import Listwise


def _oracle(labels, top_grade: int = 1) -> str:
    return ideal_answer(labels)


FOLDER = Path(__file__).resolve().parent
LISTWISE = Card(
    name="listwise", kind=RANK, folder=FOLDER, method=Listwise,
    templates={"rearank": "rearank.yaml", "rearank-answer": "rearank-answer.yaml", "rankgpt": "rankgpt.yaml"},
    grammar=lambda n: id_list_answer(n, reasoning=True, tags=True),
    reward=("pkg://rearank.methods.listwise.reward", "compute_score"), oracle=_oracle,
    examples=Examples(from_truth, "ideal", expected_from_truth), synth="sets",
    template_sets=TemplateSets(lambda labels, top_grade, reasoning: sft_target(labels, reasoning)), ability="rerank",
    checkpoints=(REARANK_7B, RANKZEPHYR_7B),
)
REASONRANK = Card(
    name="reasonrank", kind=RANK, folder=FOLDER, grammar=LISTWISE.grammar,
    reward=("pkg://rearank.methods.listwise.reasonrank", "compute_score"), oracle=_oracle,
    examples=Examples(reasonrank, "best"), synth="teacher", ability="rerank", checkpoints=(REASONRANK_7B,),
)
