import itertools
import json
import re

import pytest

from rearank.backends.base import ERROR, BackendBase, Generation, Prompt, SamplingSettings
from rearank.errors import RearankError
from rearank.methods.listwise.window import schedule
from rearank.methods.templates import load_template
from rearank.prompts import build_messages
from rearank.run.files import RunWriter, ranked_pairs, recover
from rearank.run.stats import RunStats
from rearank.types import Candidate, Query, Request
from tests.engines import listwise

PASSAGE = re.compile(r"^\[(\d+)\] .*?worth (\d+)", re.DOTALL)


class SortingBackend(BackendBase):
    """Deterministic fake: ranks a window by the 'worth N' number in each passage, from the messages alone.

    A query containing 'fail' gets a backend error; one containing 'long' hits the token limit.
    Records the size of every batch it receives.
    """

    name = "fake"

    def __init__(self):
        self.batches: list[int] = []
        self.prompts: list[Prompt] = []

    def generate(self, prompts, settings):
        self.batches.append(len(prompts))
        self.prompts.extend(prompts)
        return [self._one(p) for p in prompts]

    def _one(self, prompt):
        worth = {}
        for m in prompt.messages:
            match = PASSAGE.match(m["content"]) if m["role"] == "user" else None
            if match:
                worth[int(match.group(1))] = int(match.group(2))
        post = prompt.messages[-1]["content"]
        if "fail" in post:
            return Generation("", 10, 0, finish_reason="error")
        order = sorted(worth, key=lambda i: (-worth[i], i))
        answer = " > ".join(f"[{i}]" for i in order)
        if "long" in post:
            return Generation(f"<think>thinking about {answer}", 10, 7, finish_reason="length")
        return Generation(f"<think>ok</think><answer>{answer}</answer>", 100, len(order), finish_reason="stop")


def request(qid, worths, text="query"):
    cands = [Candidate(f"{qid}-d{i}", float(len(worths) - i), text=f"passage {i} worth {w}")
             for i, w in enumerate(worths)]
    return Request(Query(qid, f"{text} {qid}"), cands)


def shuffled_worths(n, seed):
    return [(i * 37 + seed * 11) % 101 for i in range(n)]


REQUESTS = [request(f"q{k}", shuffled_worths(n, k)) for k, n in enumerate([100, 0, 1, 5, 20, 35, 100, 57, 21, 100])]


def docids(result):
    return [c.docid for c in result.candidates]


def test_batched_equals_one_query_at_a_time():
    batched = listwise(SortingBackend(), batch_size=4).rerank(REQUESTS, progress=False)
    single = [listwise(SortingBackend(), batch_size=1).rerank([r], progress=False)[0] for r in REQUESTS]
    assert [r.query.qid for r in batched] == [r.query.qid for r in REQUESTS]
    assert [docids(r) for r in batched] == [docids(r) for r in single]
    assert [r.traces for r in batched] == [r.traces for r in single]


def test_windows_of_many_queries_share_full_batches():
    backend = SortingBackend()
    reqs = [request(f"q{k}", shuffled_worths(100, k)) for k in range(8)]
    listwise(backend, batch_size=4).rerank(reqs, progress=False)
    assert backend.batches == [4] * 18  # two cohorts of 4 queries x 9 windows, every call full
    backend = SortingBackend()
    listwise(backend, batch_size=8).rerank(reqs, progress=False)
    assert backend.batches == [8] * 9
    # each call holds windows of distinct queries
    assert len({p.qid for p in backend.prompts[:8]}) == 8


def test_one_pass_brings_the_true_top_window_to_the_top_and_keeps_the_tail():
    worths = shuffled_worths(100, 3)
    result = listwise(SortingBackend(), top_k=60).rerank([request("q", worths)], progress=False)[0]
    head = [int(c.text.split()[-1]) for c in result.candidates[:10]]
    assert head == sorted(worths[:60], reverse=True)[:10]
    assert docids(result)[60:] == [f"q-d{i}" for i in range(60, 100)]  # beyond top-k: original order
    assert sorted(docids(result)) == sorted(f"q-d{i}" for i in range(100))


def test_traces_follow_the_schedule_and_passes():
    result = listwise(SortingBackend(), passes=2).rerank([request("q", shuffled_worths(35, 1))], progress=False)[0]
    spans = [(t.start, t.end) for t in result.traces]
    assert spans == schedule(35, 20, 10, passes=2)
    assert [t.pass_index for t in result.traces] == [0, 0, 0, 1, 1, 1]
    assert all(t.status == "ok" and t.prompt_tokens == 100 for t in result.traces)
    assert all(sorted(t.permutation) == list(range(20)) for t in result.traces)


def test_backend_error_keeps_order_and_length_is_truncated():
    failing = request("f", shuffled_worths(30, 2), text="fail")
    result = listwise(SortingBackend()).rerank([failing], progress=False)[0]
    assert docids(result) == docids(failing)
    assert {t.status for t in result.traces} == {ERROR}
    long = request("l", shuffled_worths(30, 2), text="long")
    traces = listwise(SortingBackend()).rerank([long], progress=False)[0].traces
    assert {t.status for t in traces} == {"truncated"}


def test_prompts_come_from_the_one_builder_with_window_docids():
    backend = SortingBackend()
    req = request("q", shuffled_worths(25, 4))
    listwise(backend, template="rankgpt", passage_budget="3 words").rerank([req], progress=False)
    first = backend.prompts[0]
    assert first.qid == "q" and first.docids == tuple(f"q-d{i}" for i in range(5, 25))
    texts = [" ".join(c.text.split()[:3]) for c in req.candidates[5:25]]
    assert list(first.messages) == build_messages(req.query.text, texts, load_template("rankgpt"))
    # by default the template's declared budget applies (rankgpt: the first 300 characters)
    backend = SortingBackend()
    listwise(backend, template="rankgpt").rerank([req], progress=False)
    texts = [" ".join(c.text.split())[:300] for c in req.candidates[5:25]]
    assert list(backend.prompts[0].messages) == build_messages(req.query.text, texts, load_template("rankgpt"))


def test_on_result_streams_each_query_once():
    seen = []
    results = listwise(SortingBackend(), batch_size=3).rerank(REQUESTS, on_result=seen.append, progress=False)
    assert sorted(r.query.qid for r in seen) == sorted(r.query.qid for r in REQUESTS)
    assert {id(r) for r in seen} == {id(r) for r in results}


def test_backend_returning_wrong_count_is_an_error():
    class Short(SortingBackend):
        def generate(self, prompts, settings):
            return super().generate(prompts, settings)[:-1]

    with pytest.raises(RearankError, match="returned 0 generations for 1 prompts"):
        listwise(Short()).rerank([request("q", [1, 2, 3])], progress=False)


@pytest.mark.parametrize("kwargs", [{"window": 1}, {"step": 0}, {"step": 30}, {"top_k": 0}, {"batch_size": 0},
                                    {"passes": 0}, {"passage_budget": "12 bytes"}])
def test_bad_settings_are_clear_errors(kwargs):
    with pytest.raises(RearankError):
        listwise(SortingBackend(), **kwargs)


def test_run_scores_strictly_decrease_and_stats_count(tmp_path):
    results = listwise(SortingBackend(), settings=SamplingSettings(max_new_tokens=8)).rerank(REQUESTS, progress=False)
    for result in results:
        scores = [s for _, s in ranked_pairs(result)]
        assert all(a > b for a, b in itertools.pairwise(scores))
    stats = RunStats()
    for result in results:
        stats.add(result)
    d = stats.to_dict()
    assert d["queries"] == len(REQUESTS)
    assert d["calls"] == sum(len(r.traces) for r in results) == d["status_counts"]["ok"]
    assert d["prompt_tokens"] == 100 * d["calls"]


def test_run_writer_resume_keeps_only_complete_queries(tmp_path):
    reqs = [REQUESTS[i] for i in (0, 3, 4, 5)]
    results = listwise(SortingBackend()).rerank(reqs, progress=False)
    run, traces = tmp_path / "run.trec", tmp_path / "traces.jsonl"
    writer = RunWriter(run, traces)
    for result in results[:3]:
        writer.write(result)
    writer.close()
    # simulate a kill in the middle of the third query's run lines
    text = run.read_text()
    cut = text.rindex("q4 Q0") + 7
    run.write_text(text[:cut])
    expected = {r.query.qid: len(r.candidates) for r in reqs}
    done = recover(run, traces, expected)
    assert done == {"q0", "q3"}
    assert {line.split()[0] for line in run.read_text().splitlines()} == {"q0", "q3"}
    assert {json.loads(line)["qid"] for line in traces.read_text().splitlines()} == {"q0", "q3"}
    writer = RunWriter(run, traces, resume=True, expected=expected)
    assert writer.done == {"q0", "q3"}
    for result in results[2:]:
        writer.write(result)
    writer.close()
    lines = run.read_text().splitlines()
    assert len(lines) == sum(len(r.candidates) for r in results)
    assert all(len(line.split()) == 6 for line in lines)
    trace_lines = [json.loads(line) for line in traces.read_text().splitlines()]
    assert len(trace_lines) == sum(len(r.traces) for r in results)
