"""The RAG selectors, value by value: the spec parser's refusals, the oracle's groups, BM25, and the engines of the
ranking methods' selectors (listwise, pointwise, groupwise: any method; built on a recording fake in place of the model
backend) ranking passages."""

from __future__ import annotations

import dataclasses

import pytest

from rearank.backends.base import BackendBase, Generation, SamplingSettings
from rearank.errors import RearankError
from rearank.methods import Groupwise, Listwise, Pointwise
from rearank.rag.selectors import make_selector
from rearank.types import Passage, QAItem


class ByPid(BackendBase):
    """Prefers higher passage ids: a pointwise prompt scores its pid, a listwise window is answered pid-descending."""

    name = "bypid"

    def generate(self, prompts, settings):
        out = []
        for p in prompts:
            if len(p.docids) == 1:
                out.append(Generation(p.docids[0], 5, 1))
            else:
                order = sorted(range(len(p.docids)), key=lambda i: -int(p.docids[i]))
                answer = " > ".join(f"[{i + 1}]" for i in order)
                out.append(Generation(f"<think>ok</think><answer>{answer}</answer>", 5, 1))
        return out


@pytest.fixture
def built(monkeypatch):
    """Each ``make_backend(name, model, **options)`` the selectors make, answered by :class:`ByPid`."""
    calls = []

    def make_backend(name, model=None, **options):
        calls.append((name, model, options))
        return ByPid()

    monkeypatch.setattr("rearank.backends.registry.make_backend", make_backend)
    return calls


def settings_of(method) -> dict:
    """A method's settings, field by field (methods compare by identity)."""
    return {f.name: getattr(method, f.name) for f in dataclasses.fields(method)}


def item(qid: str, n: int) -> QAItem:
    return QAItem(qid, f"question {qid}?", ("x",), tuple(Passage(str(i), f"t{i}", f"text {i}") for i in range(n)))


def test_unknown_selector_names_every_choice():
    with pytest.raises(RearankError, match=r"^unknown selector 'bm42'; choose one of none, oracle, bm25, barrag, "
                                           r"listwise, groupwise, pointwise \(as NAME or NAME:ARG\)$"):
        make_selector("bm42")


def test_an_option_a_selector_does_not_take_is_refused_naming_it():
    with pytest.raises(RearankError, match=r"^bad options for the none selector: .*'k1'"):
        make_selector("none", k1=0.9)


def test_oracle_puts_supporting_then_has_answer_then_the_rest_in_given_order():
    passages = (Passage("a", "", "plain"), Passage("b", "", "has it", True), Passage("c", "", "supports"),
                Passage("d", "", "plain too"))
    ranked = make_selector("oracle").rank([QAItem("q", "?", ("x",), passages, frozenset({"c"}))])
    assert [p.pid for p in ranked[0]] == ["c", "b", "a", "d"]


def test_bm25_ranks_each_items_own_passages():
    first = QAItem("q1", "red apple", ("x",), (Passage("1a", "", "a blue sky"), Passage("1b", "", "a red apple")))
    second = QAItem("q2", "green pear", ("x",), (Passage("2a", "", "a green pear"), Passage("2b", "", "grey stone")))
    ranked = make_selector("bm25").rank([first, second])
    assert [[p.pid for p in r] for r in ranked] == [["1b", "1a"], ["2a", "2b"]]


def test_listwise_defaults(built):
    selector = make_selector("listwise")
    assert selector.name == "listwise:embedded"
    assert built == [("hf", None, {})]
    engine = selector.reranker
    assert settings_of(engine.method) == settings_of(Listwise(template="rearank", window=20, step=10))
    assert engine.settings == SamplingSettings(max_new_tokens=256) and engine.batch_size == 32


def test_listwise_options_reach_the_method_the_engine_and_the_backend(built):
    selector = make_selector("listwise:m", backend="openai", template="rearank-answer", window=3, step=2,
                             batch_size=5, max_new_tokens=64, base_url="http://x")
    assert selector.name == "listwise:m"
    assert built == [("openai", "m", {"base_url": "http://x"})]
    engine = selector.reranker
    assert settings_of(engine.method) == settings_of(Listwise(template="rearank-answer", window=3, step=2))
    assert engine.settings == SamplingSettings(max_new_tokens=64) and engine.batch_size == 5


def test_listwise_refuses_the_oracle_backend(built):
    with pytest.raises(RearankError, match=r"^listwise selector: use --selector oracle for the oracle$"):
        make_selector("listwise", backend="oracle")
    assert built == []


@pytest.mark.parametrize("spec", ["listwise:m", "pointwise:m"])
def test_a_model_selector_ranks_each_items_passages_quietly(built, spec, capsys):
    ranked = make_selector(spec).rank(
        [item("q1", 5), item("q2", 2)])
    assert [[p.pid for p in r] for r in ranked] == [["4", "3", "2", "1", "0"], ["1", "0"]]
    assert ranked[0][0] == Passage("4", "t4", "text 4")
    assert capsys.readouterr().err == ""  # no progress bar: the evaluation draws its own


def test_pointwise_builds_the_scorer_on_the_engine(built):
    selector = make_selector("pointwise:runs/rrpo/final", device="cpu")
    assert selector.name == "pointwise:runs/rrpo/final"
    assert built == [("scorer", "runs/rrpo/final", {"device": "cpu"})]
    assert settings_of(selector.reranker.method) == settings_of(Pointwise()) and selector.reranker.batch_size == 256
    assert make_selector("pointwise").name == "pointwise:embedded" and built[-1] == ("scorer", None, {})


def test_any_ranking_method_selects_with_its_options_sorted_as_every_face_sorts_them(built):
    selector = make_selector("groupwise:m", group_size=4, seed=3, temperature=0.5, batch_size=7, device="cpu")
    assert selector.name == "groupwise:m"
    assert built == [("hf", "m", {"device": "cpu"})]  # the method's default backend; the rest of the options go to it
    engine = selector.reranker
    assert settings_of(engine.method) == settings_of(Groupwise(group_size=4, seed=3))
    assert engine.settings == SamplingSettings(max_new_tokens=256, temperature=0.5, seed=3) and engine.batch_size == 7
    with pytest.raises(RearankError, match=r"^'window' is not an option of the groupwise method; it takes: "):
        make_selector("groupwise:m", window=3)
