"""Process start-up settings: the CPU defaults every rearank entry point runs with.

Idle OpenMP threads spin by default (libgomp: ``GOMP_SPINCOUNT`` 300000) before they sleep; on a busy machine
the spinning threads take the cores the working ones need, and one embedded-model window on CPU took several
times longer (``bench/bench_cpu_threads.py``, docs/performance.md). ``OMP_WAIT_POLICY=PASSIVE`` makes them sleep
at once (spin count 0), with identical output.

OpenMP reads its environment once, when torch loads it: a value set after ``import torch`` has no effect. So
:func:`apply` runs when the ``rearank`` package is first imported (``rearank/__init__.py``), which every entry point
does before torch: the ``rearank`` command, ``rearank serve``, ``python -m rearank...`` modules and
``from rearank import Reranker``. A value the user set is kept. When torch was imported before rearank,
:func:`warn_if_late` tells the Python face's user, once, on the first local model load.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import MutableMapping

#: The settings and their values; each is set only where the environment has none.
CPU_DEFAULTS = {"OMP_WAIT_POLICY": "PASSIVE"}

#: The defaults that were missing when rearank was imported after torch had started OpenMP without them.
_late: list[str] = []


def apply(environ: MutableMapping[str, str] = os.environ) -> list[str]:
    """Set each of :data:`CPU_DEFAULTS` the environment lacks; return the names set. Those set after torch was
    imported are remembered (they cannot take effect) for :func:`warn_if_late`."""
    missing = [name for name in CPU_DEFAULTS if name not in environ]
    for name in missing:
        environ[name] = CPU_DEFAULTS[name]
    if "torch" in sys.modules:
        _late.extend(n for n in missing if n not in _late)
    return missing


def warn_if_late() -> None:
    """Warn once when torch started OpenMP before rearank could set its CPU defaults (they then have no effect)."""
    if not _late:
        return
    names = " ".join(f"{n}={CPU_DEFAULTS[n]}" for n in _late)
    _late.clear()
    warnings.warn(f"torch was imported before rearank, so OpenMP started without {names}: on a busy CPU generation "
                  f"can be several times slower; import rearank before torch, or set {names} before starting Python",
                  RuntimeWarning, stacklevel=3)
