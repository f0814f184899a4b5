"""Groupwise method edges found by mutation testing: setting messages, the raw fusion of GroupRank's released
inference, documents scored in several groups, shuffle numbers in groups and traces, budgets reaching the texts."""

import pytest

from rearank.backends.base import Generation
from rearank.errors import RearankError
from rearank.methods.groupwise import Groupwise, check_group_settings, min_max, sliding_groups
from rearank.methods.groupwise.parser import scores_grammar
from tests.methods import CharTokenizer, request


def answer(*scores):
    return "<answer>{" + ", ".join(f'"[{i}]": {s}' for i, s in enumerate(scores, 1)) + "}</answer>"


def ranked(method, req, answers):
    """docids in result order, each group answered by ``answers[task index]``."""
    state, tasks = method.start(req)
    for task in tasks:
        method.apply(state, task, Generation(answers[task.index], 1, 1))
    return [c.docid for c in method.result(state).candidates]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"group_step": 0}, "group_step must be between 1 and group_size (20), got 0"),
    ({"group_step": 21}, "group_step must be between 1 and group_size (20), got 21"),
    ({"fusion_weight": 1.5}, "fusion_weight must be between 0 and 1, got 1.5"),
    ({"fallback": "keep"}, "fallback must be one of retriever, zero, got 'keep'"),
    ({"fusion": "sum"}, "fusion must be one of minmax, raw, got 'sum'"),
])
def test_groupwise_settings_refused_with_their_message(kwargs, message):
    with pytest.raises(RearankError) as err:
        Groupwise(**kwargs)
    assert str(err.value) == message


def test_group_step_may_equal_the_group_size_and_fusion_defaults_to_minmax():
    assert Groupwise(group_size=4, group_step=4).spans(8) == [(0, 4), (4, 8)]
    check_group_settings(group_size=4, group_step=None, shuffles=1, fusion_weight=None, fallback="zero", top_k=10)


def test_min_max_edges():
    assert min_max([]) == []
    assert min_max([3.0, 3.0]) == [0.0, 0.0]
    assert min_max([1.0, 3.0, 2.0]) == [0.0, 1.0, 0.5]


def test_groups_edges():
    assert sliding_groups(0, 3, 1) == []
    assert Groupwise().spans(2) == [(0, 2)] and Groupwise().spans(1) == []
    state, tasks = Groupwise().start(request(1))
    assert tasks == [] and state.texts == []


def test_raw_fusion_adds_the_scaled_score_to_the_retrievers():
    # alpha 0.5: 0.5 * s / 10 + 0.5 * retriever -> 1.9, 0.8, 1.0, 0.55
    req = request(scores=[3.0, 1.5, 1.0, 0.5])
    llm = [answer(8, 1, 10, 6)]
    assert ranked(Groupwise(group_size=4, fusion_weight=0.5, fusion="raw"), req, llm) == ["d0", "d2", "d1", "d3"]
    # min-max fusion of the same scores: 0.5 * [0.78, 0, 1, 0.56] + 0.5 * [1, 0.4, 0.2, 0] -> d0, d2, d3, d1
    assert ranked(Groupwise(group_size=4, fusion_weight=0.5), req, llm) == ["d0", "d2", "d3", "d1"]


def test_a_document_in_two_groups_gets_its_mean():
    # groups (0, 2) and (1, 3): d1 is scored 9 and 1 -> mean 5 (a sum would be 10, a count from 1 would give 3.3)
    method = Groupwise(group_size=2, group_step=1)
    assert ranked(method, request(3), [answer(6, 9), answer(1, 4)]) == ["d0", "d1", "d2"]
    assert ranked(method, request(3), [answer(4, 9), answer(1, 6)]) == ["d2", "d1", "d0"]


def test_shuffle_numbers_reach_groups_and_traces():
    method = Groupwise(group_size=2, shuffles=2)
    assert [g.shuffle for g in method.groups(request(4))] == [0, 0, 1, 1]
    state, tasks = method.start(request(4))
    for task in tasks:
        method.apply(state, task, Generation(answer(5, 5), 3, 2, latency_s=0.5, think_tokens=2, think_budget_hit=True))
    traces = method.result(state).traces
    assert [t.pass_index for t in traces] == [0, 0, 1, 1]
    assert {(t.qid, t.latency_s, t.think_tokens, t.think_budget_hit) for t in traces} == {("q1", 0.5, 2, True)}
    assert method.task_count(4) == 4 and Groupwise(group_size=2, shuffles=3).task_count(4) == 6


def test_an_answer_without_a_valid_id_falls_back_to_the_retriever():
    # valid JSON, but no id of the group: the retriever order, not zeros filled in
    method = Groupwise(group_size=3)
    assert ranked(method, request(3), ['<answer>{"[9]": 10}</answer>']) == ["d0", "d1", "d2"]
    state, [task] = method.start(request(3))
    method.apply(state, task, Generation('<answer>{"[9]": 10}</answer>', 1, 1))
    assert state.scores[0] == [10.0, 10 * (1 - 1 / 3), 10 * (1 - 2 / 3)]


def test_texts_and_prompts_use_the_methods_budget_template_and_tokenizer():
    state, _ = Groupwise(passage_budget="5c").start(request(2))
    assert state.texts == ["passa", "passa"]
    state, _ = Groupwise(passage_budget="5 tokens", tokenizer=CharTokenizer()).start(request(2, "one two three"))
    assert state.texts == ["one t", "one t"]
    # grouprank's own budget (300 tokens, words without a tokenizer) keeps a 450-character word whole
    state, _ = Groupwise().start(request(2, "x" * 450))
    assert state.texts == ["x" * 450] * 2
    # the prompt shows the method's cut (5,000 characters), not the template's 300 words again
    long = " ".join(["w"] * 400)
    state, [task] = Groupwise(passage_budget="5000c").start(request(2, long))
    assert any(long in message["content"] for message in task.prompt.messages)
    assert task.prompt.answer == scores_grammar(2)


def test_oracle_answer_scales_grade_one_to_ten_by_default():
    # with the default top grade 1, a grade-1 document scores 10 (a top grade of 2 would give it 5)
    assert '"[1]": 10' in Groupwise().answer_text([1, 0])


def test_the_reasoning_switch_reaches_the_template_grammar_parser_and_oracle():
    off = Groupwise(group_size=2, reasoning="off")
    assert off.template.name == "grouprank-answer" and off.reasoning is False
    state, [task] = off.start(request(2))
    assert task.prompt.answer == scores_grammar(2, reasoning=False) != scores_grammar(2)
    off.apply(state, task, Generation(answer(3, 7), 1, 1))  # the answer alone is all an answer-only template asks
    assert state.traces[0].status == "ok"
    assert off.answer_text([1, 0]) == '<answer>{"[1]": 10, "[2]": 0}</answer>'
    on = Groupwise(group_size=2)
    state, [task] = on.start(request(2))
    on.apply(state, task, Generation(answer(3, 7), 1, 1))  # without its <reason> block: scored, but bad tags
    assert state.traces[0].status == "bad_tags" and state.scores[0] == [3.0, 7.0]
