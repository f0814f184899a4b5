"""Listwise method edges found by mutation testing: setting checks and their messages, the answer grammar per
template, passage budgets and tokenizers reaching the prompt, the trace of each window, task counts."""

import pytest

from rearank.backends.base import LENGTH, STOP, Generation
from rearank.errors import RearankError
from rearank.grammar import id_list_answer
from rearank.methods.groupwise import Groupwise
from rearank.methods.listwise import Listwise
from rearank.methods.listwise.answer import ideal_answer
from tests.methods import CharTokenizer, request


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"window": 1}, "window must be at least 2, got 1"),
    ({"step": 0}, "step must be at least 1, got 0"),
    ({"passes": 0}, "passes must be at least 1, got 0"),
    ({"top_k": 0}, "top_k must be at least 1, got 0"),
    ({"window": 10, "step": 11}, "step (11) must not exceed window (10), or some passages are never compared"),
    ({"budget": 0}, "budget must be at least 1, got 0"),  # whatever the strategy
    ({"strategy": "tdpart", "pivot": 20}, "pivot (20) must be below window (20): the pivot is a rank of the top window"),
    ({"strategy": "tdpart", "budget": 9},
     "budget (9) must be at least pivot (10): a level keeps the passages above the pivot"),
    # each strategy's settings refused by the other, as passes was (--step 3 with tdpart was ignored silently)
    ({"strategy": "tdpart", "step": 3},
     "step (3) is for the sliding strategy; tdpart's windows follow from window, pivot and budget"),
    ({"pivot": 5}, ("pivot (5) and budget (100) are for the tdpart strategy; the sliding windows follow from "
                    "window, step and passes")),
    ({"budget": 20}, ("pivot (10) and budget (20) are for the tdpart strategy; the sliding windows follow from "
                      "window, step and passes")),
])
def test_listwise_settings_refused_with_their_message(kwargs, message):
    with pytest.raises(RearankError) as err:
        Listwise(**kwargs)
    assert str(err.value) == message


def test_smallest_settings_accepted():
    assert Listwise(window=2, step=2).policy.windows(4) == [(2, 4, 0), (0, 2, 0)]
    assert Listwise(window=2, step=1, top_k=1).policy.windows(5) == []
    assert Listwise(strategy="tdpart", window=3, pivot=2, budget=2).budget == 2  # a budget may equal the pivot
    with pytest.raises(RearankError, match="group_size must be at least 2, got 1"):
        Groupwise(group_size=1)


def test_bad_passage_budget_message_is_kept():
    with pytest.raises(RearankError, match="12 parsecs"):
        Listwise(passage_budget="12 parsecs")


def test_two_candidates_make_one_window_one_makes_none():
    method = Listwise()
    assert method.policy.windows(2) == [(0, 2, 0)]
    assert method.policy.windows(1) == []
    state, tasks = method.start(request(1))
    assert tasks == [] and state.texts == []


@pytest.mark.parametrize(("kwargs", "n"), [({"window": 4, "step": 2, "passes": 2, "top_k": 6}, 10),
                                           ({"window": 3, "step": 1, "passes": 1, "top_k": 100}, 7),
                                           ({"window": 20, "step": 10, "passes": 3, "top_k": 50}, 30)])
def test_task_count_is_the_number_of_windows(kwargs, n):
    # (4, 2) over 6: windows 2-6 and 0-4, twice; (3, 1) over 7: 5 windows; (20, 10) over 30: 10-30 and 0-20, 3 times
    method = Listwise(**kwargs)
    assert method.task_count(n) == len(method.policy.windows(n)) == {10: 4, 7: 5, 30: 6}[n]


def test_answer_grammar_follows_the_template():
    assert Listwise("rearank").answer_grammar(3) == id_list_answer(3, reasoning=True, tags=True)
    assert Listwise("rearank").answer_grammar(3).opening == "\n<answer>"
    rankgpt = Listwise("rankgpt").answer_grammar(3)
    assert rankgpt == id_list_answer(3, reasoning=False, tags=False) and rankgpt.think is None


def test_prompt_carries_the_window_grammar_and_next_task_index():
    method = Listwise(window=3, step=2)
    state, [task] = method.start(request(5))
    assert task.index == 0 and task.prompt.answer == method.answer_grammar(3)
    [second] = method.apply(state, task, Generation("<think>x</think>\n<answer>[1] > [2] > [3]</answer>", 1, 1))
    assert second.index == 1


def test_passages_rendered_with_the_methods_template_budget_and_tokenizer():
    long = "x" * 350
    state, _ = Listwise("rankgpt").start(request(2, long))
    assert state.texts == ["x" * 300] * 2  # rankgpt's 300 characters, not rearank's 400
    state, [task] = Listwise("rearank", passage_budget="500c").start(request(2, "y" * 450))
    # the prompt shows the passage under the method's budget, not cut again to the template's 400
    assert any("y" * 450 in message["content"] for message in task.prompt.messages)
    state, _ = Listwise(passage_budget="5 tokens", tokenizer=CharTokenizer()).start(request(2, "one two three"))
    assert state.texts == ["one t", "one t"]


def test_window_trace_keeps_the_generation():
    method = Listwise(window=3, step=2)
    state, [task] = method.start(request(3))
    text = "<think>[2] is best</think>\n<answer>[2] > [1] > [3]</answer>"
    generation = Generation(text, 11, 7, finish_reason=LENGTH, latency_s=0.25, think_tokens=4, think_budget_hit=True)
    method.apply(state, task, generation)
    [trace] = state.traces
    assert (trace.raw_output, trace.latency_s, trace.think_tokens, trace.think_budget_hit) == (text, 0.25, 4, True)
    # an answer that ran into the token limit is read as cut, even when it looks complete
    assert trace.status == "truncated"


def test_stopped_answer_is_not_read_as_cut():
    method = Listwise(window=3, step=2)
    state, [task] = method.start(request(3))
    method.apply(state, task, Generation("<think>x</think>\n<answer>[2] > [1]</answer>", 1, 1, finish_reason=STOP))
    assert state.traces[0].status == "missing_ids"


def test_answer_text_is_the_ideal_order():
    assert Listwise().answer_text([0, 2, 1]) == ideal_answer([0, 2, 1])


def answered(method, req, text="<answer>[1] > [2] > [3]</answer>"):
    """The traces of ``req`` with every window answered ``text``, round by round."""
    state, tasks = method.start(req)
    while tasks:
        tasks = [new for task in tasks for new in method.apply(state, task, Generation(text, 1, 1))]
    return state.traces


def test_traces_record_pass_round_and_partition():
    # sliding: each window is a round of its own, partition 0
    traces = answered(Listwise(window=2, step=1, passes=2), request(3))
    assert [(t.start, t.pass_index, t.round, t.partition) for t in traces] == [
        (1, 0, 0, 0), (0, 0, 1, 0), (1, 1, 2, 0), (0, 1, 3, 0)]
    # tdpart over 6 with window 3, pivot 2, answers keeping the presented order: the top window (round 0), then
    # the pivot with 3, 4 and with 5 (round 1, partitions 0 and 1); nothing beats the pivot, so no third round
    traces = answered(Listwise(strategy="tdpart", window=3, pivot=2), request(6))
    assert [(t.pass_index, t.round, t.partition) for t in traces] == [(0, 0, 0), (0, 1, 0), (0, 1, 1)]
