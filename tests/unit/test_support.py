"""docs/support.md is what the code declares: regenerated, it is the same page; it names every method and backend
of rearank's registries; its cells follow the declarations (a backend answering one method, Ray Data LLM)."""

from __future__ import annotations

import re

from rearank import support
from rearank.backends.base import READER
from rearank.backends.registry import BACKENDS, role
from rearank.methods import METHODS


def test_the_page_is_current():
    page = support.PAGE.read_text(encoding="utf-8")
    assert page == support.render(), "docs/support.md is stale: run `python -m rearank.support --write`"
    assert support.main(["--check"]) == 0


def test_the_page_names_every_registered_method_and_backend():
    page = support.render()
    backends = [name for name in BACKENDS.builtin_names if role(name) != READER]
    assert backends and list(METHODS.builtin_names)
    grid = page.split("## Methods x backends")[1].split("\n\n")[1]
    header, _rule, *rows = grid.splitlines()
    assert re.findall(r"`([^`]+)`", header) == backends
    assert [re.match(r"\| `([^`]+)`", row)[1] for row in rows] == list(METHODS.builtin_names)
    for name in backends:
        assert f"| `{name}` |" in page.split("## Backends")[1]
    for name in METHODS.builtin_names:
        assert f"| `{name}` |" in page.split("## Methods\n")[1]


def test_cells_follow_what_backends_declare_and_methods_show(monkeypatch):
    listwise, pointwise = support.method_caps("listwise"), support.method_caps("pointwise")
    assert (listwise.ready, listwise.tasks, listwise.grammar) == (1, 9, "IdList")  # 20 by 10 over 100
    assert pointwise.ready == pointwise.tasks == 100 and pointwise.grammar is None
    scorer, vllm, openai = (support.backend_caps(n) for n in ("scorer", "vllm", "openai"))
    assert support.cell(listwise, scorer) == "no: scorer answers pointwise only"
    assert support.cell(pointwise, scorer) == "yes: Ray"
    assert support.cell(listwise, vllm) == "yes: constrained, think budget, Ray (Ray Data LLM)"
    assert support.cell(listwise, openai) == "yes: constrained, think budget, in flight, Ray"
    assert support.cell(pointwise, openai) == "yes: in flight, Ray"  # no answer grammar: nothing to constrain

    # a declaration changed in code changes the page, which then no longer matches the file
    monkeypatch.setattr(BACKENDS["openai"], "FOR_METHODS", ("pointwise",))
    assert "no: openai answers pointwise only" in support.render()
    assert support.main(["--check"]) == 1
