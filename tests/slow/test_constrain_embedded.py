"""The embedded SmolLM2-135M through the hf backend with ``-O constrain=answer`` on real dl19 windows: every answer
is a full permutation by the shared parser, and ``-O max_think_tokens=N`` caps every window's reasoning at N."""

import pytest

from rearank.backends.base import SamplingSettings
from rearank.backends.registry import make_backend
from rearank.data.packs import load_requests
from rearank.methods.listwise.answer import parse_answer
from tests.conftest import require
from tests.engines import groupwise, listwise

pytestmark = pytest.mark.slow

THINK = 12


@pytest.fixture(scope="module")
def backend():
    require("transformers", "the `hf` extra")
    require("lmformatenforcer", "the `hf` extra (lm-format-enforcer)")
    return make_backend("hf", "embedded", max_think_tokens=THINK)  # constrain=answer: the embedded model's default


@pytest.fixture
def requests(dl19, monkeypatch):
    monkeypatch.setenv("REARANK_DATA", str(dl19.parents[1]))
    return load_requests(dataset="dl19", top_k=100, max_queries=2)


def test_every_dl19_window_is_a_full_permutation(backend, requests):
    assert backend.constrain and backend.max_think_tokens == THINK
    engine = listwise(backend, settings=SamplingSettings(max_new_tokens=200), top_k=30, window=20, step=10,
                      passage_budget="32 tokens")
    results = engine.rerank(requests, progress=False)
    traces = [t for r in results for t in r.traces]
    assert len(traces) == 4
    for trace in traces:
        parsed = parse_answer(trace.raw_output, trace.end - trace.start)
        assert parsed.status == trace.status == "ok" and parsed.strict_format and parsed.has_tags, trace.raw_output
        assert sorted(parsed.permutation) == list(range(20))
        assert trace.think_tokens is not None and trace.think_tokens <= THINK
        assert trace.think_budget_hit == (trace.think_tokens == THINK)


def test_groupwise_groups_are_complete_scores(backend, requests):
    from rearank.methods.groupwise.parser import parse_scores

    engine = groupwise(backend, settings=SamplingSettings(max_new_tokens=160), top_k=16, group_size=8,
                       passage_budget="24 tokens")
    traces = [t for r in engine.rerank(requests[:1], progress=False) for t in r.traces]
    assert len(traces) == 2
    for trace in traces:
        parsed = parse_scores(trace.raw_output, 8)
        assert parsed.status == trace.status == "ok" and parsed.n_scored == 8, trace.raw_output
