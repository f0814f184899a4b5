"""Pointwise method edges: the reasoning switch and its prompt, the chat message, the trace of each answer, a failed
generation's text, non-finite scores, two candidates, the oracle's answer text."""

from __future__ import annotations

import pytest

from rearank.backends.base import ERROR, Generation
from rearank.errors import RearankError
from rearank.methods import Pointwise
from rearank.methods.pointwise import parse_score
from rearank.methods.pointwise.method import NO_SCORE, OK
from rearank.types import WindowTrace
from tests.methods import request

PLAIN = "Query: what?\nDocument: passage 1\nIs the document relevant to the query? Answer yes or no."
THINK = (" First think it over inside <think> </think>: what the query asks and what the document offers. Then write "
         "only yes or no inside <answer> </answer>.")


@pytest.mark.parametrize("text", ["1e999", "-1e400", "<answer>9e9999</answer>"])
def test_a_number_past_the_float_range_is_no_score(text):
    assert parse_score(text) is None


@pytest.mark.parametrize(("value", "on"), [("on", True), ("off", False), ("yes", True), ("0", False), (None, False),
                                           (True, True)])
def test_reasoning_switch_is_stored_as_a_bool_and_shapes_the_question(value, on):
    method = Pointwise(reasoning=value)
    assert method.reasoning is on
    _, tasks = method.start(request(2))
    assert tasks[1].prompt.messages == ({"role": "user", "content": PLAIN + (THINK if on else "")},)


def test_an_unknown_reasoning_value_is_refused_with_the_switch_s_own_line():
    with pytest.raises(RearankError, match=r"^reasoning must be on or off, got 'maybe'$"):
        Pointwise(reasoning="maybe")


def test_two_candidates_are_scored_and_one_or_none_is_not():
    method = Pointwise()
    assert [method.task_count(n) for n in (0, 1, 2, 3)] == [0, 0, 2, 3]
    assert Pointwise(top_k=2).task_count(5) == 2 and Pointwise(top_k=1).task_count(5) == 0
    _, tasks = method.start(request(2))
    assert [t.index for t in tasks] == [0, 1] and [t.prompt.docids for t in tasks] == [("d0",), ("d1",)]


def test_each_answer_leaves_its_exact_trace():
    method = Pointwise()
    state, tasks = method.start(request(3))
    assert method.apply(state, tasks[2], Generation("yes", 11, 3, latency_s=0.25)) == []
    assert method.apply(state, tasks[0], Generation("unsure", 7, 2, latency_s=1.5)) == []
    assert state.scores == [None, None, 1.0]
    assert state.traces == {
        2: WindowTrace(qid="q1", start=2, end=3, pass_index=0, prompt_tokens=11, completion_tokens=3,
                       raw_output="yes", permutation=(0,), status=OK, latency_s=0.25),
        0: WindowTrace(qid="q1", start=0, end=1, pass_index=0, prompt_tokens=7, completion_tokens=2,
                       raw_output="unsure", permutation=(0,), status=NO_SCORE, latency_s=1.5),
    }
    result = method.result(state)
    assert [c.docid for c in result.candidates] == ["d2", "d0", "d1"]
    assert [t.start for t in result.traces] == [0, 2]


def test_a_failed_generation_scores_nothing_whatever_its_text():
    method = Pointwise()
    state, tasks = method.start(request(2))
    method.apply(state, tasks[0], Generation("9", 4, 1, finish_reason=ERROR, error="HTTP 500"))
    method.apply(state, tasks[1], Generation("1", 4, 1))
    assert state.scores == [None, 1.0] and state.traces[0].raw_output == "9"
    assert (state.traces[0].status, state.traces[0].error) == (ERROR, "HTTP 500")  # counted as a failed call
    assert (state.traces[1].status, state.traces[1].error) == (OK, "")
    assert [c.docid for c in method.result(state).candidates] == ["d1", "d0"]


def test_the_oracle_answer_is_the_one_grade_plain_or_after_a_reasoning_block():
    assert Pointwise().answer_text([2], 3) == "2"
    assert Pointwise(reasoning="on").answer_text([3], 3) == "<think>The judged grade is 3.</think>\n<answer>3</answer>"
    assert parse_score(Pointwise(reasoning="on").answer_text([3], 3)) == 3.0
