"""The method cards: one per method folder, each declaring what the consumers read; METHODS is the view of the
ranking cards' classes; a reader's oracle answer reads back through its own parser; a bad card or entry point is a
one-line error."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from rearank import plugins
from rearank.errors import RearankError
from rearank.methods import METHODS, Listwise
from rearank.methods.card import CARDS, RANK, READER, SELECTOR, Card, TemplateSets, card, cards
from rearank.methods.templates import load_prompt_file

METHODS_DIR = Path(__file__).resolve().parents[2] / "rearank" / "methods"


def test_every_method_folder_has_a_card_and_every_card_a_folder():
    folders = {p.parent for p in METHODS_DIR.glob("*/card.py")}
    assert folders == {p for p in METHODS_DIR.iterdir() if (p / "__init__.py").is_file()}
    assert {c.folder for c in cards()} == folders
    assert [c.name for c in cards(READER)] == ["plain", "barrag-generator", "arena"]
    assert [c.name for c in cards(SELECTOR)] == ["barrag-selector"]
    assert {c.name for c in cards(RANK)} == {"listwise", "reasonrank", "groupwise", "pointwise"}


@pytest.mark.parametrize("name", ["plain", "barrag-generator", "arena", "barrag-selector"])
def test_a_rag_cards_prompt_file_names_it_and_its_oracle_answer_reads_back(name):
    rag = card(name)
    template = next(iter(rag.templates))
    assert load_prompt_file(template).answer_format == name
    response = rag.oracle("the Eiffel Tower", [2, 5])
    parsed = rag.parse(response)
    assert parsed == ("[2], [5]" if rag.kind == SELECTOR else "the Eiffel Tower")


def test_rank_cards_oracle_answers_are_their_methods():
    from rearank.methods import Groupwise, Listwise

    labels = [0, 2, 1]
    assert card("listwise").oracle(labels, 2) == Listwise().answer_text(labels, 2)
    assert card("groupwise").oracle(labels, 2) == Groupwise().answer_text(labels, 2)


def test_methods_are_the_ranking_cards_classes():
    ranking = [c for c in cards(RANK) if c.method is not None]
    assert list(METHODS) == [c.name for c in ranking] == ["listwise", "groupwise", "pointwise"]
    assert METHODS.builtin_names == list(METHODS) and len(METHODS) == 3
    assert all(METHODS[c.name] is c.method and c.method.name == c.name for c in ranking)
    assert "reasonrank" not in METHODS and "plain" not in METHODS  # a training format; a reader format
    with pytest.raises(RearankError, match=r"^unknown method 'reasonrank'; choose one of: listwise, groupwise, "
                       r"pointwise$"):
        METHODS.get_or_raise("reasonrank")
    assert card("pointwise").backend == "scorer" and "grouprank-released" in card("groupwise").presets


_READER = {"kind": READER, "placeholders": (frozenset(), frozenset()), "render": list, "parse": str}


@pytest.mark.parametrize(("fields", "message"), [
    ({"kind": "ranker"}, "kind must be one of rank, reader, selector, got 'ranker'"),
    ({"kind": READER}, "a reader card declares placeholders, render and parse"),
    ({"synth": "qa"}, "synth 'qa' needs a rows builder"),
    ({"synth": "web"}, "synth must be one of sets, teacher, qa"),
    ({"synth": "sets"}, "synth 'sets' needs a method"),
    ({"template_sets": TemplateSets(dict)}, "template sets go with synth 'sets'"),
    ({**_READER, "backend": "hf"}, "a reader card has no method, presets, backend or template sets"),
    ({"method": Listwise}, "its method Listwise is named 'listwise'"),
])
def test_a_malformed_card_is_one_line(fields, message):
    with pytest.raises(RearankError, match=message):
        Card(**{"name": "x", "kind": RANK, "folder": METHODS_DIR, **fields})


def test_an_entry_point_that_is_no_card_of_its_name_is_named(monkeypatch):
    points = [EntryPoint("not-a-card", "json:dumps", "rearank.cards")]
    monkeypatch.setattr(plugins, "entry_points", lambda group: [p for p in points if p.group == group])
    monkeypatch.setattr(CARDS, "_loaders", None)
    monkeypatch.setattr(CARDS, "_loaded", {})
    with pytest.raises(RearankError, match="rearank.cards entry point 'not-a-card' gave <function dumps"):
        card("not-a-card")
    with pytest.warns(UserWarning, match="not-a-card"):  # left out of the loop over cards, named
        assert "not-a-card" not in [c.name for c in cards()]
    with pytest.warns(UserWarning, match="not-a-card"):  # and out of the methods listed, yet named when used
        assert "not-a-card" not in list(METHODS)
    assert "not-a-card" in METHODS
    with pytest.raises(RearankError, match="rearank.cards entry point 'not-a-card' gave"):
        METHODS.get_or_raise("not-a-card")
