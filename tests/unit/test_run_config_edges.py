"""The run configuration's edges: its record key by key, the settings it hands the engine and the backend, and its
refusals word for word (the scorer asked to reason, unknown options, the oracle without qrels, a pre-method record)."""

from __future__ import annotations

import pytest

from rearank.backends.base import SamplingSettings
from rearank.backends.oracle import OracleBackend
from rearank.errors import RearankError
from rearank.run import config as run_config
from rearank.run.config import RunConfig, resume_settings

SAMPLING = SamplingSettings(max_new_tokens=99, temperature=0.5, top_p=0.9, seed=7)


def listwise():
    return RunConfig(backend="oracle", model="m", method="listwise", options={"window": 8, "step": 4, "template": None},
                     backend_options={"x": 1}, sampling=SAMPLING, batch_size=4)


def test_the_record_holds_every_setting_under_its_name():
    # the options given, the others at the listwise defaults; reasoning not given: the rearank template reasons
    assert listwise().record() == {
        "backend": "oracle", "model": "m", "backend_options": {"x": 1}, "method": "listwise",
        "template": "rearank", "window": 8, "step": 4, "passes": 1, "top_k": 100, "passage_budget": None,
        "reasoning": True, "strategy": "sliding", "pivot": 10, "budget": 100,
        "max_new_tokens": 99, "temperature": 0.5, "top_p": 0.9, "seed": 7, "batch_size": 4}


def test_reasoning_is_recorded_as_what_the_method_does():
    assert RunConfig(backend="oracle", options={"reasoning": "off"}).record()["reasoning"] is False
    assert RunConfig(backend="hf", method="pointwise", options={"reasoning": "on"}).record()["reasoning"] is True


def test_only_the_pointwise_scorer_refuses_to_reason():
    with pytest.raises(RearankError) as err:
        RunConfig(backend="scorer", method="pointwise", options={"reasoning": "on"})
    assert str(err.value) == ("--reasoning on asks an LLM to reason before its yes/no; the scorer backend scores "
                              "(query, passage) pairs without generating: add --backend hf, vllm or openai")
    # another method on the scorer, or a pointwise LLM, may reason
    assert RunConfig(backend="scorer", method="listwise", options={"reasoning": "on"}).ranking_method.reasoning
    assert RunConfig(backend="openai", method="pointwise", options={"reasoning": "on"}).ranking_method.reasoning


def test_unknown_options_are_listed_with_the_known_ones():
    with pytest.raises(RearankError) as err:
        RunConfig(method="pointwise", options={"window": 5, "group_size": 2})
    assert str(err.value) == "group_size, window: not an option of the pointwise method; it takes: top_k, reasoning"


def test_the_engine_and_backend_get_the_configured_settings(monkeypatch):
    config = listwise()
    engine = config.engine(OracleBackend({}))
    assert (engine.settings, engine.batch_size, engine.method) == (SAMPLING, 4, config.ranking_method)
    built = []
    monkeypatch.setattr(run_config.registry, "make_backend", lambda *args, **kwargs: built.append((args, kwargs)))
    config.make_backend({"q": {"d": 1}})
    assert built == [(("oracle", "m"), {"x": 1, "qrels": {"q": {"d": 1}}})]
    with pytest.raises(RearankError) as err:
        config.make_backend()
    assert str(err.value) == ("the oracle backend ranks by relevance judgments: pass --qrels "
                              "(or a --dataset with qrels)")


def test_a_record_from_before_methods_names_its_source():
    expected = ("{} records its method under 'mode' (an earlier rearank's key), so the run cannot be resumed: start "
                "a new output folder (or --output file) and run without --resume")
    with pytest.raises(RearankError) as err:
        resume_settings({"mode": "listwise"})
    assert str(err.value) == expected.format("the recorded run")
    with pytest.raises(RearankError) as err:
        resume_settings({"mode": "listwise"}, source="out/stats.json")
    assert str(err.value) == expected.format("out/stats.json")
