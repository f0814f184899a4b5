import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rearank.backends.base import BackendBase, Generation, SamplingSettings
from rearank.backends.oracle import OracleBackend
from rearank.errors import RearankError
from rearank.methods.groupwise import (
    build_group_messages,
    fallback_scores,
    load_group_template,
    min_max,
    parse_scores,
    partition,
    sliding_groups,
)
from rearank.methods.groupwise.parser import format_scores
from rearank.methods.groupwise.prompt import sft_target
from rearank.run.stats import RunStats
from rearank.types import Candidate, Query, Request
from tests.engines import groupwise


class TableBackend(BackendBase):
    """Fake backend: ``answer(prompt)`` gives the text (or a Generation) of each group; records batches."""

    name = "table"

    def __init__(self, answer):
        self.answer = answer
        self.batches: list[list] = []

    def generate(self, prompts, settings):
        self.batches.append(list(prompts))
        out = []
        for prompt in prompts:
            answer = self.answer(prompt)
            out.append(answer if isinstance(answer, Generation) else Generation(answer, 50, 5))
        return out


def scores_from(table, default=0):
    """A backend answering each document's score from ``table[docid]``."""
    return TableBackend(lambda p: "<reason>r</reason><answer>"
                        + format_scores([table.get(d, default) for d in p.docids]) + "</answer>")


def make_request(qid, n, scores=None):
    cands = [Candidate(f"{qid}-d{i}", float(scores[i]) if scores else float(n - i), text=f"text {i}") for i in range(n)]
    return Request(Query(qid, f"query {qid}"), cands)


def docids(result):
    return [c.docid for c in result.candidates]


@given(st.integers(0, 300), st.integers(2, 50))
def test_partition_covers_once_with_balanced_sizes(n, size):
    spans = partition(n, size)
    assert len(spans) == math.ceil(n / size)
    assert [i for s, e in spans for i in range(s, e)] == list(range(n))
    if spans:
        sizes = [e - s for s, e in spans]
        assert max(sizes) <= size and max(sizes) - min(sizes) <= 1


@given(st.integers(1, 300), st.integers(2, 50), st.data())
def test_sliding_groups_cover_everything(n, size, data):
    step = data.draw(st.integers(1, size))
    spans = sliding_groups(n, size, step)
    assert set().union(*(range(s, e) for s, e in spans)) == set(range(n))
    assert all(e - s == min(size, n) for s, e in spans)
    assert spans[-1][1] == n and spans[0][0] == 0


def test_calls_per_query_is_n_over_g_per_shuffle():
    requests = [make_request("q1", 100), make_request("q2", 45), make_request("q3", 1)]
    backend = scores_from({})
    stats = RunStats()
    results = groupwise(backend, group_size=20, shuffles=3).rerank(requests, on_result=stats.add, progress=False)
    assert [len(r.traces) for r in results] == [3 * 5, 3 * 3, 0]
    assert stats.calls == 24 and stats.queries == 3 and stats.to_dict()["calls_per_query"] == 8
    assert sum(len(b) for b in backend.batches) == 24


def test_mean_over_sliding_groups():
    # groups (0,3), (1,4), (2,5): d1 is scored 10 then 0 (mean 5), d2 is 6, 6, 6; d0 gets 4, d3 and d4 get 1
    table = {
        ("q-d0", "q-d1", "q-d2"): [4, 10, 6],
        ("q-d1", "q-d2", "q-d3"): [0, 6, 1],
        ("q-d2", "q-d3", "q-d4"): [6, 1, 1],
    }
    backend = TableBackend(lambda p: f"<reason>r</reason><answer>{format_scores(table[p.docids])}</answer>")
    [result] = groupwise(backend, group_size=3, group_step=1).rerank([make_request("q", 5)], progress=False)
    # mean: d2 6 > d1 5 > d0 4 > d3 1 = d4 1 (ties keep the retriever order); max or last would differ
    assert docids(result) == ["q-d2", "q-d1", "q-d0", "q-d3", "q-d4"]
    assert [(t.start, t.end) for t in result.traces] == [(0, 3), (1, 4), (2, 5)]


def test_group_scores_compare_across_groups():
    table = {"q-d5": 9, "q-d0": 2, "q-d3": 7}
    [result] = groupwise(scores_from(table), group_size=2).rerank([make_request("q", 6)], progress=False)
    assert docids(result)[:3] == ["q-d5", "q-d3", "q-d0"]
    assert docids(result)[3:] == ["q-d1", "q-d2", "q-d4"]  # all 0: retriever order


def test_shuffles_are_seeded_and_cover_every_document():
    def run(seed):
        backend = scores_from({})
        groupwise(backend, group_size=5, shuffles=3, seed=seed).rerank([make_request("q", 10)], progress=False)
        return [p.docids for batch in backend.batches for p in batch]

    first = run(0)
    assert first == run(0) and first != run(1)
    assert first[0] + first[1] == tuple(f"q-d{i}" for i in range(10))  # shuffle 0 keeps the retriever order
    for shuffle in range(3):
        assert sorted(first[2 * shuffle] + first[2 * shuffle + 1]) == sorted(f"q-d{i}" for i in range(10))
    assert first[2] + first[3] != first[0] + first[1]


def test_shuffle_ensemble_averages():
    # the model always gives the first presented document 10 and the others 0: averaging over shuffles
    backend = TableBackend(lambda p: "<reason>r</reason><answer>"
                           + format_scores([10] + [0] * (len(p.docids) - 1)) + "</answer>")
    [result] = groupwise(backend, group_size=4, shuffles=4, seed=3).rerank([make_request("q", 4)], progress=False)
    firsts = [p.docids[0] for batch in backend.batches for p in batch]
    assert len(firsts) == 4
    # a document's mean is 10 * (times presented first) / 4; ties keep the retriever order
    expected = sorted((f"q-d{i}" for i in range(4)), key=lambda d: (-firsts.count(d), d))
    assert docids(result) == expected and len(set(firsts)) > 1


def test_fallback_retriever_and_zero():
    def answer(p):
        if "q-d0" in p.docids:
            return "I cannot judge these."
        return f"<reason>r</reason><answer>{format_scores([9, 4])}</answer>"

    def rerank(fallback):
        ranker = groupwise(TableBackend(answer), group_size=2, fallback=fallback)
        return ranker.rerank([make_request("q", 4)], progress=False)[0]

    retriever, zero = rerank("retriever"), rerank("zero")
    assert docids(retriever) == ["q-d0", "q-d2", "q-d1", "q-d3"]  # d0 and d1 fall back to 10 and 7.5
    assert docids(zero) == ["q-d2", "q-d3", "q-d0", "q-d1"]
    assert [t.status for t in zero.traces] == ["bad_tags", "ok"]
    assert fallback_scores([7, 2, 5], "retriever", 10) == pytest.approx([3.0, 8.0, 5.0])
    assert fallback_scores([7, 2], "zero", 10) == [0.0, 0.0]


@pytest.mark.parametrize("kwargs", [{"group_size": 5}, {"group_size": 4, "group_step": 3, "shuffles": 3}])
def test_every_group_failing_keeps_the_retriever_order(kwargs):
    ranker = groupwise(TableBackend(lambda p: "no idea"), **kwargs)
    [result] = ranker.rerank([make_request("q", 13)], progress=False)
    assert docids(result) == [f"q-d{i}" for i in range(13)]


def test_missing_ids_in_a_parsed_group_score_zero_and_backend_errors_fall_back():
    backend = TableBackend(lambda p: '<reason>r</reason><answer>{"[2]": 3}</answer>')
    [result] = groupwise(backend, group_size=3).rerank([make_request("q", 3)], progress=False)
    assert docids(result) == ["q-d1", "q-d0", "q-d2"] and result.traces[0].status == "missing_ids"
    assert result.traces[0].permutation == (1, 0, 2)
    errors = TableBackend(lambda p: Generation("", 10, 0, finish_reason="error"))
    [result] = groupwise(errors, group_size=3, fallback="zero").rerank([make_request("q", 3)], progress=False)
    assert docids(result) == ["q-d0", "q-d1", "q-d2"] and result.traces[0].status == "error"


def test_fusion_with_retriever_scores():
    request = make_request("q", 3, scores=[10.0, 9.0, 0.0])
    table = {"q-d0": 0, "q-d1": 5, "q-d2": 10}
    rank = lambda alpha: docids(
        groupwise(scores_from(table), group_size=3, fusion_weight=alpha).rerank([request], progress=False)[0])
    assert rank(None) == rank(1.0) == ["q-d2", "q-d1", "q-d0"]
    assert rank(0.0) == ["q-d0", "q-d1", "q-d2"]
    # alpha 0.5: d0 = 0.5 * 0 + 0.5 * 1, d1 = 0.5 * 0.5 + 0.5 * 0.9, d2 = 0.5 * 1 + 0.5 * 0
    assert rank(0.5) == ["q-d1", "q-d0", "q-d2"]
    assert min_max([3.0, 3.0]) == [0.0, 0.0] and min_max([1.0, 3.0, 2.0]) == [0.0, 1.0, 0.5]


def test_batches_mix_queries_and_results_keep_input_order():
    backend = scores_from({"b-d3": 10})
    seen = []
    requests = [make_request("a", 4), make_request("b", 4), make_request("c", 4)]
    results = groupwise(backend, group_size=2, batch_size=4).rerank(requests, on_result=seen.append,
                                                                        progress=False)
    assert [len(b) for b in backend.batches] == [4, 2]
    assert {p.qid for p in backend.batches[0]} == {"a", "b"}
    assert [r.query.qid for r in results] == ["a", "b", "c"] and sorted(r.query.qid for r in seen) == ["a", "b", "c"]
    assert docids(results[1])[0] == "b-d3"


def test_top_k_keeps_the_tail_and_prompts_use_the_template():
    backend = scores_from({"q-d2": 10})
    [result] = groupwise(backend, group_size=3, top_k=3).rerank([make_request("q", 6)], progress=False)
    assert docids(result) == ["q-d2", "q-d0", "q-d1", "q-d3", "q-d4", "q-d5"]
    messages = list(backend.batches[0][0].messages)
    assert messages == build_group_messages("query q", ["text 0", "text 1", "text 2"])
    assert '{"[1]": 8' in messages[-1]["content"] and "<reason>" in messages[-1]["content"]


def test_the_oracle_answers_in_the_groupwise_format():
    qrels = {"q": {"q-d3": 2, "q-d1": 1}}
    ranker = groupwise(OracleBackend(qrels), group_size=2)
    assert ranker.backend.answer == ranker.method.answer_text
    [result] = ranker.rerank([make_request("q", 4)], progress=False)
    assert docids(result) == ["q-d3", "q-d1", "q-d0", "q-d2"]
    assert all(parse_scores(t.raw_output, 2).status == "ok" for t in result.traces)


@pytest.mark.parametrize("kwargs", [
    {"group_size": 1}, {"shuffles": 0}, {"top_k": 0}, {"batch_size": 0}, {"group_step": 0},
    {"group_step": 21}, {"fusion_weight": 1.5}, {"fallback": "random"}, {"passage_budget": "-1c"},
    {"fusion": "sum"},
    {"template": "no-such-template"},
])
def test_invalid_settings_are_user_errors(kwargs):
    with pytest.raises(RearankError):
        groupwise(scores_from({}), **kwargs)


def test_template_and_sft_target():
    template = load_group_template(None)
    assert template.name == "grouprank" and load_group_template("grouprank") == template
    target = sft_target([0, 3, 1], max_label=3)
    parsed = parse_scores(target["content"], 3)
    assert target["role"] == "assistant" and parsed.status == "ok" and parsed.scores == (0.0, 10.0, 3.0)


def test_settings_reach_the_backend():
    seen = []

    class Recorder(TableBackend):
        def generate(self, prompts, settings):
            seen.append(settings)
            return super().generate(prompts, settings)

    settings = SamplingSettings(max_new_tokens=64, temperature=0.5)
    groupwise(Recorder(lambda p: "x"), settings=settings).rerank([make_request("q", 3)], progress=False)
    assert seen == [settings]


@given(st.lists(st.text(max_size=60) | st.dictionaries(st.sampled_from(["[1]", "[2]", "3", "[9]", "x"]),
                                                          st.integers(-5, 15) | st.floats() | st.text(max_size=3))
                .map(lambda d: f"<reason>r</reason><answer>{json.dumps(d)}</answer>"), min_size=1, max_size=8),
       st.integers(1, 12), st.integers(2, 5), st.sampled_from([None, 0.3]))
def test_any_answers_give_a_permutation_of_the_candidates(answers, n, size, alpha):
    counter = iter(range(10**6))
    backend = TableBackend(lambda p: answers[next(counter) % len(answers)])
    [result] = groupwise(backend, group_size=size, shuffles=2, fusion_weight=alpha).rerank(
        [make_request("q", n)], progress=False)
    assert sorted(docids(result)) == sorted(f"q-d{i}" for i in range(n))
