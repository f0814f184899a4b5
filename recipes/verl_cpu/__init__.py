"""verl 0.9.1 on CPU, through verl's own extension points; active only in processes with ``VERL_PLATFORM=cpu``.

verl imports this package on ``import verl`` in every process, Ray workers included (the ``verl.plugins``
entry point in pyproject.toml). With ``VERL_PLATFORM=cpu`` it registers

* :class:`~recipes.verl_cpu.platform.PlatformCPU` under ``PlatformRegistry`` as ``cpu`` (gloo, torch.cpu plus
  the device calls verl makes, Ray resource ``GPU`` so that a declared ``num_gpus`` schedules the workers);
* the FSDP engines for device ``cpu`` and the few unavoidable patches (:mod:`recipes.verl_cpu.patches`).

Without ``VERL_PLATFORM=cpu`` importing it applies one patch only, the one GPU runs need too:
``trl_without_value_head`` (verl 0.9.1 imports a class trl >= 1.13 no longer has on every model build), and registers
the transformers rollout, which then generates on the GPU (recipes/gpu/run.py). verl swallows a plugin's import
error (logged at debug level): ``tests/integration/test_verl_cpu_plugin.py`` checks that it loads.
"""

from __future__ import annotations

from recipes.verl_cpu import patches
from recipes.verl_cpu.settings import PLATFORM, ROLLOUT, enabled

__all__ = ["PLATFORM", "ROLLOUT", "activate", "enabled"]


def activate() -> None:
    """Register the CPU platform, the transformers rollout and the patches (idempotent)."""
    from recipes.verl_cpu import platform

    platform.register()
    patches.install()


patches.install_everywhere()
if enabled():
    activate()
