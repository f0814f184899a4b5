"""The plain reader format's card."""

from pathlib import Path

from rearank.methods.card import READER, Card
from rearank.methods.plain.reader import extract_answer, plain_messages, plain_oracle

CARD = Card(
    name="plain", kind=READER, folder=Path(__file__).resolve().parent, templates={"plain": "plain.yaml"},
    placeholders=(frozenset({"question", "passages"}), frozenset({"index", "title", "passage"})),
    render=plain_messages, parse=extract_answer, oracle=plain_oracle,
)
