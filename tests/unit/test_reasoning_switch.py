"""The reasoning switch (``--reasoning on|off``, ``Reranker(reasoning=...)``, ``rearank serve --reasoning``): each
method's answer-only variant, chosen by one option, recorded in the run's settings."""

from __future__ import annotations

import argparse
from pathlib import Path

import httpx
import pytest

from rearank.api import Reranker
from rearank.errors import FormatError, RearankError
from rearank.flags import add_method_arguments, add_model_arguments, run_config
from rearank.methods import Groupwise, Listwise, Pointwise
from rearank.methods.groupwise.parser import parse_scores
from rearank.methods.listwise.answer import parse_answer
from rearank.methods.templates import load_template, with_reasoning
from rearank.prompts import as_reasoning, build_messages
from rearank.run.config import RunConfig, resume_settings
from tests.serving import oracle_service, running

QRELS = {"q1": {"d2": 3, "d4": 2, "d0": 1}}
PASSAGES = [(f"d{i}", f"passage number {i} about fleas") for i in range(6)]
EXPECTED = ["d2", "d4", "d0", "d1", "d3", "d5"]  # by grade; ties keep the presented order


def _texts(template):
    return f"{template.system} {template.prefix_user} {template.post}".lower()


@pytest.mark.parametrize("name, variant", [("rearank", "rearank-answer"), ("grouprank", "grouprank-answer"),
                                           ("grouprank-released", "grouprank-released-answer")])
def test_each_reasoning_template_has_an_answer_only_variant_and_back(name, variant):
    on, off = load_template(name), load_template(variant)
    assert on.reasoning and not off.reasoning
    assert with_reasoning(name, False).name == variant and with_reasoning(variant, True).name == name
    assert with_reasoning(name, None).name == name and with_reasoning(name, True).name == name
    assert "<answer>" in _texts(off) and "<think>" not in _texts(off) and "<reason>" not in _texts(off)
    assert (on.layout, on.passage_budget, on.passage_user) == (off.layout, off.passage_budget, off.passage_user)


def test_a_template_without_a_variant_is_refused_with_what_to_do():
    assert not load_template("rankgpt").reasoning  # inferred: it mentions no <think>
    with pytest.raises(RearankError, match="'rankgpt' does not ask for reasoning and names no variant"):
        with_reasoning("rankgpt", True)


def test_a_user_template_names_its_variant_by_a_path_beside_it(tmp_path):
    body = 'passage_user: "[{index}] {passage}"\npost: "{query}: answer in <answer></answer>"\n'
    (tmp_path / "mine-answer.yaml").write_text(body + "variant: mine.yaml\n")
    (tmp_path / "mine.yaml").write_text(body.replace("answer in", "reason in <think></think>, then answer in")
                                        + "variant: mine-answer.yaml\n")
    assert with_reasoning(tmp_path / "mine.yaml", False).name == "mine-answer"
    assert with_reasoning(tmp_path / "mine-answer.yaml", True).name == "mine"
    (tmp_path / "odd.yaml").write_text(body + "reasoning: true\nvariant: mine.yaml\n")
    with pytest.raises(FormatError, match="'variant': 'mine.yaml' is not a template without reasoning"):
        with_reasoning(tmp_path / "odd.yaml", False)
    (tmp_path / "bad.yaml").write_text(body + "reasoning: maybe\n")
    with pytest.raises(FormatError, match="bad.yaml:3: field 'reasoning' must be true or false"):
        load_template(tmp_path / "bad.yaml")


@pytest.mark.parametrize("value, expected", [("on", True), ("OFF", False), (True, True), (False, False),
                                             (None, None), ("yes", True), ("0", False)])
def test_switch_values(value, expected):
    assert as_reasoning(value) is expected


@pytest.mark.parametrize("cls", [Listwise, Groupwise, Pointwise])
def test_a_bad_switch_value_fails_when_the_method_is_built(cls):
    with pytest.raises(RearankError, match="reasoning must be on or off, got 'maybe'"):
        cls(reasoning="maybe")


def test_methods_record_what_their_template_asks():
    assert Listwise().reasoning is True and Listwise(template="rankgpt").reasoning is False
    assert Listwise(reasoning="off").template.name == "rearank-answer"
    assert Groupwise(reasoning=False).template.name == "grouprank-answer"
    assert Pointwise().reasoning is False and Pointwise(reasoning="on").reasoning is True


def test_the_listwise_grammar_reads_the_templates_reasoning_field_not_its_text(tmp_path):
    """The template's ``reasoning`` is the one source: a file that sets it false keeps no reasoning block in the
    grammar, though its words mention ``<think>``."""
    text = (Path(__file__).parents[2] / "rearank" / "methods" / "listwise" / "rankgpt.yaml").read_text()
    file = tmp_path / "terse.yaml"
    file.write_text(text.replace("name: rankgpt", "name: terse\nreasoning: false").replace(
        "and nothing else.", "and nothing else: no <think> block."))
    method = Listwise(template=str(file))
    assert method.reasoning is False and "<think>" in _texts(method.template)
    assert method.answer_grammar(3).think is None


def test_answer_only_grammars_have_no_reasoning_block():
    assert Listwise(reasoning="off").answer_grammar(3).think is None
    assert Listwise().answer_grammar(3).think == ("<think>", "</think>")
    off = Groupwise(reasoning="off")
    request_messages = build_messages("q", ["a", "b"], off.template)
    assert "<reason>" not in request_messages[-1]["content"]


@pytest.mark.parametrize("method, options", [("listwise", {"window": 4, "step": 2}), ("groupwise", {"group_size": 3}),
                                             ("pointwise", {})])
@pytest.mark.parametrize("reasoning", [True, False])
def test_the_oracle_answers_in_the_switched_format_and_every_answer_parses(method, options, reasoning):
    with Reranker(backend="oracle", method=method, qrels=QRELS, reasoning=reasoning, **options) as rr:
        ranking = rr.rerank("what is a flea", PASSAGES, qid="q1")
        traces = ranking.traces
    assert ranking.docids == EXPECTED
    assert traces and all(t.status == "ok" for t in traces)
    thought = ("<think>" in t.raw_output or "<reason>" in t.raw_output for t in traces)
    assert all(thought) if reasoning else not any(thought)


def test_answer_only_outputs_parse_as_ok_and_reasoning_outputs_still_need_their_tags():
    assert parse_answer("<answer>[2] > [1]</answer>", 2).status == "ok"
    assert parse_scores('<answer>{"[1]": 3, "[2]": 7}</answer>', 2, reasoning=False).status == "ok"
    assert parse_scores('<answer>{"[1]": 3, "[2]": 7}</answer>', 2).status == "bad_tags"


def _args(*argv):
    parser = argparse.ArgumentParser()
    add_model_arguments(parser)
    add_method_arguments(parser)
    return parser.parse_args(list(argv))


def test_the_flag_reaches_the_method_and_the_recorded_settings():
    assert "--reasoning on|off" in _help()
    config = run_config(_args("--backend", "oracle", "--reasoning", "off"))
    assert config.ranking_method.template.name == "rearank-answer" and config.record()["reasoning"] is False
    default = run_config(_args("--backend", "oracle")).record()
    assert default["reasoning"] is True  # the template's own, recorded as what ran
    assert run_config(_args("--backend", "oracle", "--template", "rankgpt")).record()["reasoning"] is False
    groupwise = run_config(_args("--backend", "oracle", "--method", "groupwise", "--reasoning", "off"))
    assert groupwise.ranking_method.template.name == "grouprank-answer"


def _help():
    parser = argparse.ArgumentParser()
    add_method_arguments(parser)
    return parser.format_help()


@pytest.mark.parametrize("command", ["rerank", "benchmark", "synth", "serve"])
def test_every_command_help_names_the_switch(command, capsys):
    from rearank.cli import main

    with pytest.raises(SystemExit):
        main([command, "--help"])
    assert "--reasoning on|off" in capsys.readouterr().out


def test_a_bad_flag_value_is_a_usage_error(capsys):
    with pytest.raises(SystemExit):
        _args("--reasoning", "maybe")
    assert "reasoning must be on or off, got 'maybe'" in capsys.readouterr().err


def test_a_resume_with_the_other_setting_differs_in_the_settings_it_must_match():
    on = RunConfig(backend="oracle", options={"reasoning": "on"}).record()
    off = RunConfig(backend="oracle", options={"reasoning": False}).record()
    same = RunConfig(backend="oracle").record()
    assert resume_settings(on) != resume_settings(off) and resume_settings(on) == resume_settings(same)
    assert "reasoning" in resume_settings(on)


def test_the_scorer_backend_cannot_reason():
    with pytest.raises(RearankError, match="the scorer backend scores"):
        RunConfig(backend="scorer", method="pointwise", options={"reasoning": True})


def test_the_server_runs_and_reports_the_switch():
    topics = {"q1": "what is a flea"}
    docs = {d: ("", t) for d, t in PASSAGES}
    service = oracle_service(topics, docs, QRELS, options={"window": 4, "step": 2, "reasoning": "off"})
    with running(service) as base:
        health = httpx.get(base + "/health").json()
        body = httpx.post(base + "/v1/rerank", json={"query": "what is a flea",
                                                      "documents": [t for _, t in PASSAGES]}).json()
    assert health["reasoning"] is False
    windows = body["rearank"]["windows"]
    assert [r["index"] for r in body["results"]] == [2, 4, 0, 1, 3, 5]
    assert all(w["status"] == "ok" and "<think>" not in w["reasoning"] for w in windows)


def test_the_listwise_and_groupwise_rewards_score_answer_only_rows_with_reasoning_off():
    from rearank.methods.groupwise.reward import compute_score as group_score
    from rearank.methods.listwise.reward import compute_score as list_score

    truth = {"labels": [0, 2, 1]}
    listwise = "<answer>[2] > [3] > [1]</answer>"
    assert list_score("d", listwise, truth)["format_tags"] == 0.0
    assert list_score("d", listwise, truth, reasoning=False)["score"] == pytest.approx(1.0)
    groupwise = '<answer>{"[1]": 0, "[2]": 10, "[3]": 5}</answer>'
    assert group_score("d", groupwise, truth, max_label=2)["score"] == -1.0
    on = group_score("d", "<reason>r</reason>" + groupwise, truth, max_label=2)
    off = group_score("d", groupwise, truth, max_label=2, reasoning=False)
    assert off["score"] == on["score"] > 0 and off["format_tags"] == 1.0
