"""The cards of BAR-RAG's selector (picks 5 of 25 passages) and generator (answers from them)."""

from collections.abc import Sequence
from pathlib import Path

from rearank.methods.barrag.examples import generator, generator_expected, selector, selector_expected
from rearank.methods.barrag.figures import TABLE1
from rearank.methods.barrag.grammar import selection_grammar
from rearank.methods.barrag.parser import format_selection, parse_generation, parse_selection
from rearank.methods.barrag.prompt import SELECTOR_CANDIDATES, generator_messages, selector_messages
from rearank.methods.barrag.rows import generator_row, selector_row
from rearank.methods.card import READER, Card, Examples
from rearank.methods.card import SELECTOR as SELECTOR_KIND

FOLDER = Path(__file__).resolve().parent
REWARD = "pkg://rearank.methods.barrag.reward"


def generator_answer(response: str) -> str:
    """The ``<answer>`` of a generator output (its one parser), ``""`` without one."""
    return parse_generation(response).answer or ""


def selected_ids(response: str) -> str:
    """The ids a selector output chose, as ``[3], [5]`` (its one parser), ``""`` without a valid answer."""
    return format_selection(parse_selection(response, SELECTOR_CANDIDATES).ids)


def generator_oracle(answer: str, supporting: Sequence[int]) -> str:
    cites = " and ".join(f"Doc [{i}]" for i in supporting) or "The documents"
    return f"<think>{cites} give the answer.</think><answer>{answer}</answer>"


def selector_oracle(answer: str, supporting: Sequence[int]) -> str:
    return f"<think>These hold the facts.</think><answer> {format_selection(supporting)} </answer>"


GENERATOR = Card(
    name="barrag-generator", kind=READER, folder=FOLDER, templates={"barrag_generator": "barrag_generator.yaml"},
    placeholders=(frozenset({"question", "docs"}), frozenset()),
    render=lambda spec, question, passages: generator_messages(question, passages, template=spec),
    parse=generator_answer, reward=(REWARD, "compute_generator_score"), oracle=generator_oracle,
    examples=Examples(generator, "gold", generator_expected), synth="qa", rows=generator_row, first_stage=True,
    evidence=True, ability="rag-qa", published=TABLE1,
)
SELECTOR = Card(
    name="barrag-selector", kind=SELECTOR_KIND, folder=FOLDER, templates={"barrag_selector": "barrag_selector.yaml"},
    placeholders=(frozenset({"question", "docs", "k"}), frozenset()),
    render=lambda spec, question, passages: selector_messages(question, passages, template=spec),
    parse=selected_ids, grammar=selection_grammar, reward=(REWARD, "compute_selector_score"), oracle=selector_oracle,
    examples=Examples(selector, "supporting", selector_expected), synth="qa", rows=selector_row, first_stage=True,
    ability="evidence-selection", published=TABLE1,
)
