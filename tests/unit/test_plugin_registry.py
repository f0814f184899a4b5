"""The registry behind CARDS (and so METHODS) and BACKENDS: entry points beside rearank's own entries, loaded on
use; a taken name keeps its first owner (with a warning); a plugin that fails to load is a one-line error naming
it."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

from rearank import plugins
from rearank.errors import RearankError
from rearank.plugins import Registry


@pytest.fixture
def installed(monkeypatch):
    points = [EntryPoint("mine", "json:dumps", "rearank.test"), EntryPoint("own", "json:loads", "rearank.test"),
              EntryPoint("broken", "no_such_module_here:thing", "rearank.test")]
    monkeypatch.setattr(plugins, "entry_points", lambda group: [p for p in points if p.group == group])


def test_entry_points_join_the_builtins_and_load_on_use(installed):
    import json

    loaded = []
    registry = Registry("rearank.test", "widget", {"own": lambda: loaded.append("own") or "builtin"})
    with pytest.warns(UserWarning, match=r"'own' \(json:loads\) is ignored: the name is taken by another widget"):
        assert list(registry) == ["own", "mine", "broken"]
    assert loaded == []  # listing names loads nothing
    assert registry["own"] == "builtin" and registry["mine"] is json.dumps and len(registry) == 3


def test_a_broken_plugin_and_an_unknown_name_are_one_line_errors(installed):
    registry = Registry("rearank.test", "widget", {})
    assert "broken" in registry  # named, not loaded
    with pytest.raises(RearankError, match=r"^the rearank.test entry point 'broken' \(no_such_module_here:thing\) "
                       r"failed to load: ModuleNotFoundError"):
        registry["broken"]
    with pytest.raises(RearankError, match=r"^unknown widget 'nope'; choose one of: mine, own, broken$"):
        registry.get_or_raise("nope")
