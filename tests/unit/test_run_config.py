"""The typed run configuration: checked when built, builds the method and backend, records its settings flat."""

from __future__ import annotations

import pytest

from rearank.backends.base import SamplingSettings
from rearank.cli import build_parser
from rearank.errors import RearankError
from rearank.flags import run_config
from rearank.methods import Groupwise, Listwise, Pointwise
from rearank.run.config import RunConfig, resume_settings
from tests.methods import request


def test_defaults_build_rearank_listwise_and_record_flat():
    config = RunConfig(backend="oracle")
    method = config.ranking_method
    assert isinstance(method, Listwise) and (method.window, method.step, method.top_k) == (20, 10, 100)
    record = config.record()
    assert (record["method"], record["template"], record["window"], record["backend"]) == ("listwise", "rearank", 20,
                                                                                       "oracle")
    assert record["max_new_tokens"] == SamplingSettings().max_new_tokens
    assert set(resume_settings(record)) >= {"method", "template", "window", "step", "max_new_tokens"}


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"method": "pairwise"}, "unknown method 'pairwise'"),
    ({"backend": "tgi"}, "unknown backend 'tgi'"),
    ({"options": {"group_size": 5}}, "group_size: not an option of the listwise method"),
    ({"options": {"window": 1}}, "window must be at least 2"),
    ({"batch_size": 0}, "batch_size"),
])
def test_a_bad_setting_fails_when_built(kwargs, message):
    with pytest.raises(RearankError, match=message):
        RunConfig(**kwargs)


def test_the_oracle_needs_qrels_and_the_engine_runs_the_method():
    config = RunConfig(backend="oracle", method="pointwise", options={"top_k": 3})
    with pytest.raises(RearankError, match="--qrels"):
        config.make_backend()
    engine = config.engine(config.make_backend({"q1": {"d2": 2, "d1": 1}}))
    result = engine.rerank([request(4)], progress=False)[0]
    assert [c.docid for c in result.candidates] == ["d2", "d1", "d0", "d3"]


def test_the_command_line_becomes_one_config():
    parser = build_parser()
    args = parser.parse_args(["rerank", "--dataset", "dl19", "--method", "groupwise", "--group-size", "10",
                              "--seed", "7", "--temperature", "0.5", "--max-new-tokens", "99", "-O", "device=cpu",
                              "-o", "x.trec"])
    config = run_config(args)
    assert (config.backend, config.method, config.backend_options) == ("hf", "groupwise", {"device": "cpu"})
    assert config.sampling == SamplingSettings(max_new_tokens=99, temperature=0.5, top_p=1.0, seed=7)
    method = config.ranking_method
    assert isinstance(method, Groupwise) and (method.group_size, method.seed) == (10, 7)
    pointwise = run_config(parser.parse_args(["rerank", "--dataset", "dl19", "--method", "pointwise", "-o", "x"]))
    assert pointwise.backend == "scorer" and isinstance(pointwise.ranking_method, Pointwise)
    embedded = run_config(parser.parse_args(["rerank", "--dataset", "dl19", "-o", "x"]))
    assert (embedded.backend, embedded.sampling.max_new_tokens) == ("hf", 256)  # the embedded model's budget
    with pytest.raises(RearankError, match="--top-p"):
        run_config(parser.parse_args(["rerank", "--dataset", "dl19", "--top-p", "0", "-o", "x"]))


def test_the_method_and_template_flags_reach_the_config():
    parser = build_parser()
    config = run_config(parser.parse_args(["rerank", "--dataset", "dl19", "--method", "groupwise", "--template",
                                           "grouprank-released", "-o", "x"]))
    assert (config.method, config.options["template"]) == ("groupwise", "grouprank-released")
    assert config.record()["method"] == "groupwise" and "mode" not in config.record()
    with pytest.raises(SystemExit):
        parser.parse_args(["rerank", "--dataset", "dl19", "--mode", "pairwise", "-o", "x"])
