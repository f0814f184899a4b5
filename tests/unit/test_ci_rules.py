"""The test-suite's own rule: a missing dependency or pack skips for a developer and fails on CI."""

from __future__ import annotations

import sys

import pytest

from tests import conftest


def _without(monkeypatch, name: str) -> None:
    """Make ``import name`` fail as it would after ``pip uninstall name`` (None in sys.modules halts an import)."""
    monkeypatch.setitem(sys.modules, name, None)


@pytest.mark.parametrize("module", ["verl", "hydra", "vllm"])
def test_missing_module_skips_for_developers(monkeypatch, module):
    monkeypatch.delenv("CI", raising=False)
    _without(monkeypatch, module)
    with pytest.raises(pytest.skip.Exception, match=f"{module} cannot be imported"):
        conftest.require(module)


@pytest.mark.parametrize("module", ["verl", "hydra", "vllm"])
def test_missing_module_fails_on_ci(monkeypatch, module):
    monkeypatch.setenv("CI", "true")
    _without(monkeypatch, module)
    with pytest.raises(pytest.fail.Exception, match="CI must have it"):
        conftest.require(module)


def test_missing_pack_fails_on_ci(monkeypatch, tmp_path):
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("REARANK_DATA", str(tmp_path))
    with pytest.raises(pytest.fail.Exception, match="data pack 'msmarco-v1-passage/dl19' not found"):
        conftest.require_pack("msmarco-v1-passage/dl19")


def test_present_module_is_returned(monkeypatch):
    monkeypatch.setenv("CI", "true")
    assert conftest.require("json").dumps([1]) == "[1]"


@pytest.mark.parametrize(("value", "ci"), [("true", True), ("1", True), ("", False), ("false", False), ("0", False)])
def test_ci_flag(monkeypatch, value, ci):
    monkeypatch.setenv("CI", value)
    assert conftest.on_ci() is ci


def test_no_test_module_skips_a_missing_dependency_behind_the_ci_rule():
    """``pytest.importorskip`` skips on CI too: tests go through ``conftest.require`` (skip for developers, fail on CI)."""
    call = "importorskip" + "("  # split, so that this file does not match itself
    offenders = [str(path.relative_to(conftest.ROOT)) for path in sorted((conftest.ROOT / "tests").rglob("*.py"))
                 if call in path.read_text(encoding="utf-8")]
    assert offenders == []


def test_hypothesis_draws_the_same_examples_on_ci_and_explores_locally():
    """On CI (CI=true) the active profile is derandomized with no example database; locally it keeps exploring."""
    from hypothesis import HealthCheck, settings

    ci, local = settings.get_profile("ci"), settings.get_profile("rearank")
    assert ci.derandomize and ci.database is None and ci.deadline is None
    assert not local.derandomize and local.database is not None
    assert HealthCheck.too_slow in ci.suppress_health_check and HealthCheck.too_slow in local.suppress_health_check
    assert settings.default.derandomize is conftest.on_ci()
