"""bench/out/mutation.json is never older than the code it scores: each recorded module exists at its current
path and is in ``make mutation``'s table with the tests it was measured with; ``bench/mutation.py --check`` (run and
printed by ``.ci/run``) names the modules whose code changed since they were measured, and the unmeasured ones."""

from __future__ import annotations

import json

import pytest

from bench import mutation
from tests.conftest import ROOT, require

RECORDED = json.loads(mutation.OUT.read_text(encoding="utf-8"))


@pytest.mark.parametrize("module", sorted(RECORDED))
def test_each_recorded_score_is_of_a_module_make_mutation_runs(module):
    """Paths and test lists hold here; a recorded score older than its code is reported by ``.ci/run``
    (``bench/mutation.py --check``), since re-measuring a module takes minutes to an hour on 2 cores."""
    assert module in mutation.MODULES and (ROOT / module).is_file(), f"{module}: not a module make mutation runs"
    assert RECORDED[module]["tests"] == mutation.MODULES[module], \
        f"{module}'s tests changed: re-run make mutation for {module}"


def test_the_digest_ignores_docs_and_comments_not_code(tmp_path):
    path = tmp_path / "m.py"
    path.write_text('"""Doc."""\n\ndef f(x):\n    """Doc."""\n    return x + 1  # one\n')
    before = mutation.code_digest(str(path))
    path.write_text('"""Other doc."""\n\ndef f(x):\n    return x + 1  # two\n')
    assert mutation.code_digest(str(path)) == before
    path.write_text('"""Doc."""\n\ndef f(x):\n    return x + 2\n')
    assert mutation.code_digest(str(path)) != before


def test_check_names_stale_and_unmeasured_modules():
    require("mutmut", "make mutation needs it (the dev extra)")
    module = "rearank/methods/listwise/window.py"
    count = mutation.count_mutants(module)
    assert count == 48  # mutmut's generator, run in-process (the recorded run of this module made 48)
    fresh = {module: {"mutants": count, "code": mutation.code_digest(module)}}
    assert mutation.stale(fresh, [module]) == []
    assert mutation.stale({module: {"mutants": count + 1}}, [module]) == [
        f"{module}: 48 mutants now, 49 measured: re-run make mutation for {module}"]
    assert mutation.stale({module: {"mutants": count, "code": "0" * 16}}, [module]) == [
        f"{module}: its code changed since it was measured: re-run make mutation for {module}"]
    assert mutation.stale({}, [module]) == [f"{module}: not measured; run make mutation for {module}"]


def test_show_prints_a_mutants_diff_from_its_function():
    require("mutmut", "make mutation needs it (the dev extra)")
    assert mutation.show("rearank.methods.listwise.window.x_schedule__mutmut_1").splitlines()[:5] == [
        "--- rearank/methods/listwise/window.py",
        "+++ rearank/methods/listwise/window.py (x_schedule__mutmut_1)",
        "@@ -1,2 +1,2 @@",
        "-def schedule(n: int, window: int = 20, step: int = 10, passes: int = 1) -> list[tuple[int, int]]:",
        "+def schedule(n: int, window: int = 21, step: int = 10, passes: int = 1) -> list[tuple[int, int]]:"]
    with pytest.raises(mutation.MutationError, match="no such mutant now"):
        mutation.show("rearank.methods.listwise.window.x_schedule__mutmut_9999")
    with pytest.raises(mutation.MutationError, match="not a mutant of a listed module"):
        mutation.show("rearank.nowhere.x_f__mutmut_1")
