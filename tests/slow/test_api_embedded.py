"""The face with the embedded SmolLM2 on the hf backend: plain strings in, a complete ranking out (mechanics only)."""

from __future__ import annotations

import pytest

from rearank import Reranker

pytestmark = pytest.mark.slow

PASSAGES = [
    "The flea life cycle has four stages: egg, larva, pupa and adult.",
    "Dogs are domesticated descendants of wolves.",
    "Adult fleas feed on blood and lay eggs in the host's fur.",
    "The stock market closed higher on Tuesday.",
    "Flea larvae feed on organic debris before spinning cocoons.",
]


def test_embedded_model_reranks_plain_strings():
    with Reranker("embedded", backend="hf", max_new_tokens=32, window=3, step=2) as rr:
        assert rr.settings.max_new_tokens == 32
        ranking = rr.rerank("what is a flea's life cycle", PASSAGES)
        many = rr.rerank_many([("what is a flea's life cycle", PASSAGES), ("dogs", PASSAGES[:2])])
    assert sorted(ranking.order) == list(range(5))  # a permutation of the input, whatever the model answered
    assert [p.text for p in ranking.passages] == [PASSAGES[i] for i in ranking.order]
    assert [p.score for p in ranking.passages] == [1.0, 0.8, 0.6, 0.4, 0.2]
    assert [(t.start, t.end) for t in ranking.traces] == [(2, 5), (0, 3)]  # windows of 3 by 2, back to front
    assert all(t.completion_tokens <= 32 and t.prompt_tokens > 0 for t in ranking.traces)
    assert many[0].order == ranking.order  # greedy: the same answer when batched with another query
    assert sorted(many[1].order) == [0, 1]


def test_default_budget_for_the_embedded_model():
    with Reranker("embedded") as rr:
        assert rr.settings.max_new_tokens == 256  # EMBEDDED_MAX_NEW_TOKENS
