"""The CPU platform verl asks for every device call (``verl.plugin.platform.get_platform()``)."""

from __future__ import annotations

import random
import types
from contextlib import contextmanager
from typing import Any

import psutil
import torch
from verl.plugin.platform import PlatformBase, PlatformRegistry


def _memory_used() -> int:
    return psutil.Process().memory_info().rss


def device_module() -> types.ModuleType:
    """``torch.cpu`` plus the ``torch.cuda`` calls verl makes on its device module: seeding and RNG state from
    torch's CPU generator, memory figures from the process (allocated = reserved = its resident set) and the
    machine (``mem_get_info``), cache and IPC calls as no-ops, ``get_device_name() == "cpu"`` (read by verl's
    flops counter)."""
    module = types.ModuleType("verl_cpu_device", "torch.cpu with the device calls verl makes")
    for name in dir(torch.cpu):
        if not name.startswith("_"):
            setattr(module, name, getattr(torch.cpu, name))
    memory = _memory_used
    calls = {
        "current_device": lambda: "cpu",
        "manual_seed": torch.manual_seed, "manual_seed_all": torch.manual_seed, "seed": torch.seed,
        "initial_seed": torch.initial_seed,
        "get_rng_state": lambda device=None: torch.get_rng_state(),
        "set_rng_state": lambda state, device=None: torch.set_rng_state(state),
        "empty_cache": lambda: None, "ipc_collect": lambda: None,
        "set_per_process_memory_fraction": lambda fraction, device=None: None,
        "reset_peak_memory_stats": lambda device=None: None,
        "memory_allocated": lambda device=None: memory(), "memory_reserved": lambda device=None: memory(),
        "max_memory_allocated": lambda device=None: memory(), "max_memory_reserved": lambda device=None: memory(),
        "memory_stats": lambda device=None: {},
        "mem_get_info": lambda device=None: (psutil.virtual_memory().available, psutil.virtual_memory().total),
        "get_device_name": lambda device=None: "cpu",
        "is_bf16_supported": lambda *args, **kwargs: True,
    }
    for name, call in calls.items():
        setattr(module, name, call)
    return module


class PlatformCPU(PlatformBase):
    """verl's device calls on CPU: gloo for collectives, the Ray resource ``GPU`` (declare ``num_gpus`` to
    ``ray.init``; Ray accepts it without a GPU) so verl's resource pools schedule one worker per declared slot."""

    _module = device_module()

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> types.ModuleType:
        return self._module

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        from recipes.verl_cpu.settings import enabled

        return enabled()  # never auto-detected: only VERL_PLATFORM=cpu selects it

    def current_device(self) -> str:  # type: ignore[override]
        # a string, not an index: verl moves models with .to(device=get_device_id()), and an int means accelerator 0
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: Any) -> None:
        return None

    def synchronize(self, device_index: Any = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)
        random.seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        self.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[None, None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> None:
        return None


def register() -> None:
    PlatformRegistry.register(platform="cpu")(PlatformCPU)
