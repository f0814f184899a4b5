"""The verl CPU plugin (recipes.verl_cpu): loaded by ``import verl`` through the ``verl.plugins`` entry point, active
only with VERL_PLATFORM=cpu, its patches still matching the verl code they work around, and the transformers
rollout server generating batched, left-padded requests exactly as unbatched greedy generation does."""

import asyncio
import importlib
import importlib.util
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import require

torch = require("torch")
require("verl", "the `train` extra")

from recipes.verl_cpu import patches

PROBE = """
import json, sys
import verl
from verl.plugin.platform import PlatformRegistry, get_platform
from verl.workers.rollout.base import _ROLLOUT_REGISTRY
from verl.workers.rollout.replica import RolloutReplicaRegistry
out = {"loaded": "recipes.verl_cpu" in sys.modules, "cpu": PlatformRegistry.get("cpu") is not None,
       "replica": "transformers" in RolloutReplicaRegistry._registry,
       "adapter": ("transformers", "async") in _ROLLOUT_REGISTRY}
if out["cpu"]:
    import os
    os.environ.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[1])
    import torch.distributed
    from verl.utils.distributed import initialize_global_process_group_ray
    from verl.utils.device import get_device_id, get_torch_device
    initialize_global_process_group_ray()  # verl's own call: 'cpu:gloo,cpu:gloo' without the patch
    out["backend"] = torch.distributed.get_backend()
    out["platform"] = type(get_platform()).__name__
    out["device_id"] = get_device_id()
    out["device_name"] = get_torch_device().get_device_name()
    import verl.workers.engine.fsdp.transformer_impl as impl
    from verl.workers.engine.base import EngineRegistry
    out["pin"] = impl.CPUOffloadPolicy(pin_memory=True).pin_memory
    out["engine"] = EngineRegistry.get_engine_cls("language_model", "fsdp2").__name__
print(json.dumps(out))
"""


def probe(env_platform: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "VERL_PLATFORM"}
    if env_platform:
        env["VERL_PLATFORM"] = env_platform
    # MASTER_PORT 0: the one-process group's store binds a port the OS picks (none picked beforehand and freed)
    proc = subprocess.run([sys.executable, "-c", PROBE, "0"], env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_plugin_registers_everything_with_verl_platform_cpu():
    got = probe("cpu")
    assert got == {"loaded": True, "cpu": True, "replica": True, "adapter": True, "backend": "gloo",
                   "platform": "PlatformCPU", "device_id": "cpu", "device_name": "cpu", "pin": False,
                   "engine": "FSDPEngineWithLMHead"}


def test_without_verl_platform_cpu_only_the_transformers_rollout_is_registered():
    """GPU runs keep verl's own platform and engines; the transformers rollout is there to be chosen
    (``actor_rollout_ref.rollout.name=transformers``, recipes/gpu/run.py)."""
    assert probe(None) == {"loaded": True, "cpu": False, "replica": True, "adapter": True}


@pytest.mark.parametrize("platform, cuda, dtype, expected", [
    ("cpu", True, "bfloat16", ("cpu", "float32")),  # the CPU plugin on: CPU even where a GPU is
    ("", False, "bfloat16", ("cpu", "float32")),
    ("", True, None, ("cuda", "bfloat16")),
    ("", True, "float16", ("cuda", "float16")),
])
def test_rollout_server_device(platform, cuda, dtype, expected, monkeypatch):
    from recipes.verl_cpu.rollout import server_device

    monkeypatch.setenv("VERL_PLATFORM", platform)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    device, got = server_device({"dtype": dtype} if dtype else {})
    assert (device, str(got).removeprefix("torch.")) == expected


MONKEY_PATCH = """
import torch
from transformers import AutoModelForCausalLM, Qwen2Config
from verl.models.transformers.monkey_patch import apply_monkey_patch
config = Qwen2Config(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                     num_attention_heads=4, num_key_value_heads=2)
with torch.device("meta"):
    model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
apply_monkey_patch(model=model)
print("patched")
"""


def test_verl_model_build_patch_works_without_verl_platform():
    """The GPU path: verl's apply_monkey_patch on every model build imports trl's AutoModelForCausalLMWithValueHead,
    which trl >= 1.13 lacks; the plugin's guard applies without VERL_PLATFORM too."""
    env = {k: v for k, v in os.environ.items() if k != "VERL_PLATFORM"}
    proc = subprocess.run([sys.executable, "-c", MONKEY_PATCH], env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("patched"), proc.stderr[-2000:]


@pytest.mark.parametrize("name", sorted(patches.EXPECTED))
def test_patched_verl_code_is_what_the_patches_expect(name):
    """Fails when verl changes the code a patch works around: re-check the patch (recipes/verl_cpu/patches.py)."""
    module, text = patches.EXPECTED[name]
    assert text in inspect.getsource(importlib.import_module(module)), f"{name}: {module} changed"


def test_verl_interfaces_the_rollout_implements_are_unchanged():
    """The pieces of verl 0.9.1 the transformers rollout fills in: their abstract methods and the call shapes."""
    from verl.workers.rollout import llm_server
    from verl.workers.rollout.base import BaseRollout
    from verl.workers.rollout.replica import RolloutReplica, TokenOutput

    assert RolloutReplica.__abstractmethods__ == {"launch_servers"}
    assert BaseRollout.__abstractmethods__ == {"resume", "update_weights", "release"}
    assert {"token_ids", "log_probs", "stop_reason", "extra_fields"} <= set(TokenOutput.model_fields)
    source = inspect.getsource(llm_server.LLMServerClient.generate)
    assert "server.generate.remote(" in source and "sampling_params=sampling_params" in source
    assert "get_per_tensor_param" in inspect.getsource(importlib.import_module("verl.workers.engine_workers"))


def test_gloo_rewrite_leaves_other_backends_alone(monkeypatch):
    import torch.distributed

    seen = []
    monkeypatch.setattr(torch.distributed, "init_process_group", lambda backend=None, *a, **k: seen.append(backend))
    patches.single_gloo_backend()
    torch.distributed.init_process_group("cpu:gloo,cpu:gloo")
    torch.distributed.init_process_group("cpu:gloo,cuda:nccl")
    torch.distributed.init_process_group(backend="nccl")
    assert seen == ["gloo", "cpu:gloo,cuda:nccl", "nccl"]


@pytest.mark.parametrize("name", sorted(patches.EXPECTED_VLLM))
def test_patched_vllm_rollout_code_is_what_the_patches_expect(name):
    """The same for verl's vLLM rollout, read as text: importing it needs vLLM, which the project's .venv lacks."""
    module, text = patches.EXPECTED_VLLM[name]
    root = importlib.util.find_spec("verl").submodule_search_locations[0]
    source = (Path(root).parent / (module.replace(".", "/") + ".py")).read_text(encoding="utf-8")
    assert text in source, f"{name}: {module} changed"


def _fake_vllm_loader(monkeypatch, calls):
    """vLLM's loader module and layerwise reload as stand-ins recording their calls (vLLM is not installed here)."""
    utils = SimpleNamespace(process_weights_after_loading=lambda model, config, device: calls.append(("process",
                                                                                                      model)))
    reload = SimpleNamespace(initialize_layerwise_reload=lambda model: calls.append(("initialize", model)),
                             finalize_layerwise_reload=lambda model, config: calls.append(("finalize", model)))
    loader = SimpleNamespace(utils=utils, reload=reload)
    for name, module in {"vllm": SimpleNamespace(), "vllm.model_executor": SimpleNamespace(model_loader=loader),
                         "vllm.model_executor.model_loader": loader,
                         "vllm.model_executor.model_loader.utils": utils,
                         "vllm.model_executor.model_loader.reload": reload}.items():
        monkeypatch.setitem(sys.modules, name, module)
    return utils


def _worker_extension(calls, utils):
    class Extension:
        """verl's vLLMColocateWorkerExtension in outline: receive the buckets, then post-process every model."""

        def _iter_all_models(self):
            yield from ("model", "drafter")

        def update_weights_from_ipc(self, peft_config=None, base_sync_done=False, use_shm=False):
            calls.append(("receive", use_shm))
            if not (peft_config and base_sync_done):
                for model in self._iter_all_models():
                    utils.process_weights_after_loading(model, "config", "cpu")
            return "synced"

    return Extension


def test_vllm_weight_sync_runs_inside_vllms_layerwise_reload(monkeypatch):
    calls = []
    utils = _fake_vllm_loader(monkeypatch, calls)
    original = utils.process_weights_after_loading
    extension = _worker_extension(calls, utils)
    patches.vllm_layerwise_reload(SimpleNamespace(vLLMColocateWorkerExtension=extension))
    patches.vllm_layerwise_reload(SimpleNamespace(vLLMColocateWorkerExtension=extension))  # idempotent
    assert extension().update_weights_from_ipc(use_shm=True) == "synced"
    assert calls == [("initialize", "model"), ("initialize", "drafter"), ("receive", True),
                     ("finalize", "model"), ("finalize", "drafter")]
    assert utils.process_weights_after_loading is original  # restored for anything else in the process


def test_vllm_lora_adapter_sync_is_left_to_verl(monkeypatch):
    calls = []
    utils = _fake_vllm_loader(monkeypatch, calls)
    extension = _worker_extension(calls, utils)
    patches.vllm_layerwise_reload(SimpleNamespace(vLLMColocateWorkerExtension=extension))
    extension().update_weights_from_ipc({"r": 8}, True, False)
    assert calls == [("receive", False)]


def test_vllm_loader_is_restored_when_the_sync_fails(monkeypatch):
    calls = []
    utils = _fake_vllm_loader(monkeypatch, calls)
    original = utils.process_weights_after_loading

    class Failing(_worker_extension(calls, utils)):
        def update_weights_from_ipc(self, peft_config=None, base_sync_done=False, use_shm=False):
            raise RuntimeError("bucket lost")

    patches.vllm_layerwise_reload(SimpleNamespace(vLLMColocateWorkerExtension=Failing))
    with pytest.raises(RuntimeError, match="bucket lost"):
        Failing().update_weights_from_ipc()
    assert utils.process_weights_after_loading is original


@pytest.fixture(scope="module")
def tiny_dir():
    from recipes.checks.models import tiny_base

    return tiny_base()


def test_rollout_server_batches_like_unbatched_greedy_generation(tiny_dir):
    """Requests arriving together are one left-padded batch; greedy tokens and log-probs match one-at-a-time
    transformers generation, EOS is kept and nothing after it, and load_weights changes what it generates."""
    from transformers import AutoModelForCausalLM

    from recipes.verl_cpu.rollout import TransformersServer

    config = SimpleNamespace(prompt_length=64, response_length=8)
    server = TransformersServer(config, {"path": str(tiny_dir)}, replica_rank=0)
    model = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32)
    prompts = [[1, 2, 3, 4, 5, 6, 7], [9, 8, 7], [100, 200, 300, 400, 500]]
    greedy = {"temperature": 0, "top_p": 1.0, "top_k": -1, "logprobs": True}

    async def generate_all():
        return await asyncio.gather(*[server.generate(p, dict(greedy), f"r{i}") for i, p in enumerate(prompts)])

    outputs = asyncio.run(generate_all())
    for prompt, output in zip(prompts, outputs, strict=True):
        ids = torch.tensor([prompt])
        alone = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=8,
                               pad_token_id=server.pad, eos_token_id=sorted(server.eos))[0, len(prompt):].tolist()
        ends = [i for i, t in enumerate(alone) if t in server.eos]
        assert output.token_ids == (alone[: ends[0] + 1] if ends else alone)
        assert len(output.log_probs) == len(output.token_ids) and all(lp <= 0 for lp in output.log_probs)
        logits = model(torch.tensor([prompt + output.token_ids])).logits[0, len(prompt) - 1:-1]
        expected = torch.log_softmax(logits, -1).gather(1, torch.tensor(output.token_ids)[:, None])[:, 0]
        assert torch.allclose(torch.tensor(output.log_probs), expected, atol=1e-4)
    state = {name: torch.randn_like(t) for name, t in model.state_dict().items()}
    assert server.load_weights(state) == len(state)
    changed = asyncio.run(server.generate(prompts[0], dict(greedy), "again"))
    model.load_state_dict(state)
    ids = torch.tensor([prompts[0]])
    alone = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=8,
                           pad_token_id=server.pad, eos_token_id=sorted(server.eos))[0, len(prompts[0]):].tolist()
    assert changed.token_ids == alone[: len(changed.token_ids)]


def test_rollout_server_refuses_weights_of_another_model(tiny_dir):
    from recipes.verl_cpu.rollout import TransformersServer

    server = TransformersServer(SimpleNamespace(prompt_length=8, response_length=4), {"path": str(tiny_dir)}, 0)
    with pytest.raises(ValueError, match="unexpected"):
        server.load_weights({"not.a.weight": torch.zeros(2)})


@pytest.mark.parametrize("setting, expected", [(None, None), ("3", 3)])
def test_rollout_server_uses_every_core_it_is_given(tiny_dir, monkeypatch, setting, expected):
    """Ray starts an actor that reserves no CPUs with OMP_NUM_THREADS=1; the server still runs on every core of its
    CPU affinity (or on REARANK_ROLLOUT_THREADS)."""
    from recipes.verl_cpu.rollout import THREADS_ENV, TransformersServer

    before = torch.get_num_threads()
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    if setting is None:
        monkeypatch.delenv(THREADS_ENV, raising=False)
    else:
        monkeypatch.setenv(THREADS_ENV, setting)
    torch.set_num_threads(1)
    try:
        server = TransformersServer(SimpleNamespace(prompt_length=8, response_length=4), {"path": str(tiny_dir)}, 0)
        threads = torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
    assert threads == server.threads == (expected or len(os.sched_getaffinity(0)))


def test_rollout_threads_setting_is_checked(monkeypatch):
    from recipes.verl_cpu.rollout import THREADS_ENV, server_threads

    monkeypatch.setenv(THREADS_ENV, "0")
    with pytest.raises(ValueError, match=f"{THREADS_ENV}='0'"):
        server_threads()


def test_weights_sent_to_a_dead_rollout_server_end_the_step_with_its_one_line(capsys):
    """The server can die between two polls of its watch, while the actor sends it the new weights: the step ends
    with the watch's line, not Ray's page-long actor error."""
    import asyncio
    import types

    import ray
    import torch

    from recipes.verl_cpu.rollout import TransformersServerAdapter

    def dead(*_args):
        raise ray.exceptions.RayActorError()

    adapter = object.__new__(TransformersServerAdapter)
    adapter.is_leader, adapter.replica_rank = True, 0
    adapter.server = types.SimpleNamespace(load_weights=types.SimpleNamespace(remote=dead))
    with pytest.raises(RuntimeError, match=r"^rearank: the rollout server transformers_server_0 died \(RayActorError\)"):
        asyncio.run(adapter.update_weights(iter([("w", torch.zeros(2))]), global_steps=3))
    assert capsys.readouterr().err.startswith("rearank: the rollout server transformers_server_0 died (")
