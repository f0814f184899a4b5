"""The CPU defaults every entry point starts with (:mod:`rearank.machine.startup`), read back from OpenMP itself: libgomp
prints the settings it started with (``OMP_DISPLAY_ENV=VERBOSE``) when torch loads it, and ``GOMP_SPINCOUNT`` is
0 under ``OMP_WAIT_POLICY=PASSIVE``, 300000 without it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def openmp_settings(code: str, **env: str) -> tuple[dict[str, str], str]:
    """``python -c CODE`` with no OpenMP settings but ``env``: what the first OpenMP runtime loaded (torch's
    libgomp; sentencepiece and scikit-learn bring copies of their own, which torch does not use) started with, and
    stderr."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}
    done = subprocess.run([sys.executable, "-c", code], env={**clean, "PYTHONPATH": str(ROOT),
                                                               "OMP_DISPLAY_ENV": "VERBOSE", **env},
                          capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    first = done.stderr.split("OPENMP DISPLAY ENVIRONMENT END")[0]
    return dict(re.findall(r"^\s+(\w+) = '([^']*)'", first, re.MULTILINE)), done.stderr


@pytest.mark.parametrize("code", [
    "import rearank, torch; torch.ones(2) + 1",  # the Python face: from rearank import Reranker
    "import rearank.cli, torch; torch.ones(2) + 1",  # the rearank command and rearank serve (rearank.cli:main)
    # python -m rearank.MODULE: runpy imports the module's packages first, as here
    ("import runpy; runpy.run_module('rearank.backends.chat_server', run_name='imported'); import torch; "
     "torch.ones(2) + 1"),
])
def test_every_entry_point_starts_openmp_passive(code):
    settings, _ = openmp_settings(code)
    assert (settings["OMP_WAIT_POLICY"], settings["GOMP_SPINCOUNT"]) == ("PASSIVE", "0")


def test_a_value_the_user_set_is_kept():
    settings, _ = openmp_settings("import rearank, torch, os; assert os.environ['OMP_WAIT_POLICY'] == 'ACTIVE'",
                                  OMP_WAIT_POLICY="ACTIVE")
    assert settings["OMP_WAIT_POLICY"] == "ACTIVE" and settings["GOMP_SPINCOUNT"] != "0"


def test_torch_imported_first_starts_spinning_and_the_first_model_load_says_so():
    code = ("import torch, warnings; warnings.simplefilter('always')\n"
            "from rearank import Reranker\n"
            "Reranker('embedded', backend='hf', max_new_tokens=8)\n"
            "Reranker('embedded', backend='hf', max_new_tokens=8)\n")
    settings, err = openmp_settings(code, HF_HUB_OFFLINE="1")
    assert settings["GOMP_SPINCOUNT"] == "300000"  # set after torch loaded OpenMP, the default cannot act
    assert err.count("torch was imported before rearank, so OpenMP started without OMP_WAIT_POLICY=PASSIVE") == 1


def test_apply_sets_only_what_is_missing():
    from rearank.machine import startup

    environ = {"PATH": "/bin"}
    assert startup.apply(environ) == ["OMP_WAIT_POLICY"] and environ["OMP_WAIT_POLICY"] == "PASSIVE"
    environ = {"OMP_WAIT_POLICY": "active"}
    assert startup.apply(environ) == [] and environ == {"OMP_WAIT_POLICY": "active"}
