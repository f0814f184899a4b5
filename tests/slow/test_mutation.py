"""A mutation run in minutes: bench/mutation.py (mutmut) on the window schedule, its score at least 90%."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT, require

pytestmark = pytest.mark.slow


def test_window_schedule_mutants_are_killed(tmp_path):
    require("mutmut", "make mutation needs it (the dev extra)")
    out = tmp_path / "mutation.json"
    done = subprocess.run([sys.executable, "bench/mutation.py", "rearank/methods/listwise/window.py",
                           "--workdir", str(tmp_path / "w"), "--out", str(out), "--timeout", "900"],
                          cwd=ROOT, capture_output=True, text=True, check=False, timeout=1000)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(out.read_text())["rearank/methods/listwise/window.py"]
    assert result["mutants"] > 20 and result["score"] >= 0.9, result
    assert "| `rearank/methods/listwise/window.py` |" in done.stdout
