"""The ARENA generator's card."""

from collections.abc import Sequence
from pathlib import Path

from rearank.methods.arena.examples import arena, arena_expected
from rearank.methods.arena.figures import TABLE3
from rearank.methods.arena.grammar import arena_grammar
from rearank.methods.arena.parser import format_arena, parse_arena
from rearank.methods.arena.prompt import arena_messages, n_references
from rearank.methods.arena.reading import MEASURES, score_arena
from rearank.methods.arena.reward import STYLE
from rearank.methods.arena.rows import arena_row
from rearank.methods.card import READER, Card, Examples, Reading


def arena_answer(response: str) -> str:
    """The ``<answer>`` of an ARENA output (its one parser), ``""`` without one."""
    return parse_arena(response).answer or ""


def arena_oracle(answer: str, supporting: Sequence[int]) -> str:
    return format_arena(list(supporting), "The cited references give the answer.", answer)


CARD = Card(
    name="arena", kind=READER, folder=Path(__file__).resolve().parent, templates={"arena": "arena.yaml"},
    placeholders=(frozenset({"question", "references"}), frozenset()),
    render=lambda spec, question, passages: arena_messages(question, passages, template=spec),
    parse=arena_answer, grammar=arena_grammar, reward=("pkg://rearank.methods.arena.reward", "compute_score"),
    oracle=arena_oracle, examples=Examples(arena, "gold", arena_expected), synth="qa", rows=arena_row,
    ability="rag-qa", reading=Reading(lambda item: n_references(item.source), score_arena, MEASURES, style=STYLE),
    published=TABLE3,
)
