"""Backend registry: the explicit name table, option checks, lazy heavy imports."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from rearank.backends.base import GENERATOR, JUDGE, READER, SCORER, Backend, Prompt, SamplingSettings
from rearank.backends.registry import BACKENDS, backends, declared, make_backend, rerank_backends, role
from rearank.errors import RearankError
from rearank.methods import Listwise


def test_the_table_is_explicit():
    assert set(BACKENDS) == {"hf", "vllm", "vllm-async", "openai", "oracle", "scorer", "qa-oracle"}


@pytest.mark.parametrize("name", ["transformers", "HF", "hf-gpu", "openai-compatible", "vllm_cpu", "qwen", ""])
def test_unknown_names_list_the_choices(name):
    with pytest.raises(RearankError) as err:
        make_backend(name, "m")
    message = str(err.value)
    assert f"unknown backend {name!r}" in message
    for choice in BACKENDS:
        assert choice in message


def test_openai_backend_is_built_with_options():
    backend = make_backend("openai", "served", base_url="http://127.0.0.1:9/v1/", concurrency=2, max_retries=1)
    assert isinstance(backend, Backend)
    assert (backend.name, backend.model, backend.url, backend.concurrency) == (
        "openai", "served", "http://127.0.0.1:9/v1/chat/completions", 2)
    backend.close()


def test_unknown_option_is_a_clear_error():
    with pytest.raises(RearankError, match="bad options for the openai backend") as err:
        make_backend("openai", "served", temprature=0.3)
    assert "temprature" in str(err.value) and "base_url" in str(err.value)


def test_oracle_takes_qrels_and_no_model():
    backend = make_backend("oracle", qrels={"q1": {"d2": 2}})
    assert isinstance(backend, Backend) and backend.name == "oracle"
    [gen] = backend.answer_format(Listwise()).generate([Prompt(messages=(), qid="q1", docids=("d1", "d2"))], SamplingSettings())
    assert "[2] > [1]" in gen.text
    with pytest.raises(RearankError, match="takes no model"):
        make_backend("oracle", "some-model", qrels={})


@pytest.mark.parametrize("name", ["vllm", "vllm-async"])
def test_vllm_missing_is_a_clear_error(name):
    try:
        import vllm  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("vllm is installed here; tests/vllm covers it")
    with pytest.raises(RearankError, match="vllm is not installed.*make test-vllm"):
        make_backend(name, "embedded")


def test_concurrency_option_takes_a_count_or_auto():
    for value in (3, "auto"):
        assert make_backend("openai", "m", concurrency=value).concurrency == value
    for value in (0, "fast", 2.5):
        with pytest.raises(RearankError, match="concurrency"):
            make_backend("openai", "m", concurrency=value)


def test_heavy_libraries_load_only_when_a_backend_is_built():
    code = textwrap.dedent("""
        import sys
        import rearank.backends.registry, rearank.backends.models, rearank.backends.chat_server
        print(sorted(m for m in ("torch", "transformers", "vllm", "httpx") if m in sys.modules))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_backends_that_load_the_models_tokenizer_declare_it():
    from rearank.backends.ray import driver_tokenizer

    assert {name for name in BACKENDS if BACKENDS[name].MODEL_TOKENIZER} == {"hf", "vllm", "vllm-async"}
    # a backend without the model's tokenizer gives the Ray driver none (passages are cut by words)
    assert driver_tokenizer("oracle", None, {}) is None and driver_tokenizer("openai", "served", {}) is None


def test_backends_declare_their_role_and_what_a_run_needs(monkeypatch):
    assert {name: role(name) for name in BACKENDS} == {
        "hf": GENERATOR, "vllm": GENERATOR, "vllm-async": GENERATOR, "openai": GENERATOR, "oracle": JUDGE,
        "scorer": SCORER, "qa-oracle": READER}
    assert rerank_backends() == [name for name in BACKENDS if name != "qa-oracle"] and backends(READER) == ["qa-oracle"]
    assert {name for name in BACKENDS if declared(name, "NEEDS_QRELS")} == {"oracle"}
    assert {name for name in BACKENDS if not declared(name, "TAKES_MODEL")} == {"oracle"}
    assert {name for name in BACKENDS if declared(name, "LOCAL_MODEL")} == {"hf", "vllm", "vllm-async"}
    assert {name for name in BACKENDS if declared(name, "EMBEDDED_SHORT_BUDGET")} == {"hf"}
    assert {name: declared(name, "BATCH_SIZE") for name in ("hf", "openai", "scorer")} == {
        "hf": 32, "openai": 32, "scorer": 256}
    # a plugin's class need not subclass BackendBase: it gets the defaults; one that fails to load is listed
    monkeypatch.setattr(BACKENDS, "_loaded", dict(BACKENDS._loaded))  # what loads here is forgotten after
    monkeypatch.setitem(BACKENDS._all(), "bare", lambda: type("Bare", (), {"generate": None}))
    monkeypatch.setitem(BACKENDS._all(), "broken", lambda: (_ for _ in ()).throw(RearankError("failed to load")))
    assert (role("bare"), declared("bare", "NEEDS_QRELS"), declared("bare", "OPTIONS")) == (GENERATOR, False, ())
    assert role("broken") == GENERATOR and {"bare", "broken"} <= set(rerank_backends())
