"""Model-heavy training checks on CPU: TRL GRPO smoke steps, and exporting a real verl FSDP checkpoint."""

import json
import math
import os
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT, data_root, require, require_pack

pytestmark = pytest.mark.slow


def test_trl_grpo_smoke_logs_finite_metrics(tmp_path):
    require("trl", "the `train` extra")
    require_pack("msmarco-v2-passage/dl21")
    os.environ.setdefault("REARANK_DATA", str(data_root()))
    from recipes.checks.smoke import main

    metrics = tmp_path / "metrics.json"
    assert main(["--steps", "2", "--metrics", str(metrics)]) == 0
    logs = json.loads(metrics.read_text())
    assert [entry["step"] for entry in logs] == [1, 2]
    for entry in logs:
        for name in ("reward", "reward_std", "kl", "completions/mean_length", "rearank/ndcg", "rearank/r_rank"):
            assert math.isfinite(entry[name]), (name, entry)
        assert -0.8 <= entry["reward"] <= 1.0 and 0 < entry["completions/mean_length"] <= 32


# One gloo process shards the embedded model with FSDP2 and saves it with verl's own checkpoint manager,
# producing the global_step_N/actor layout a verl run writes.
WRITE_CHECKPOINT = """
import os, sys, torch, torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from transformers import AutoModelForCausalLM, AutoTokenizer
from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager
from rearank.backends.models import embedded_model_path

os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[2])
dist.init_process_group("gloo", rank=0, world_size=1)
path = embedded_model_path()
model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
mesh = init_device_mesh("cpu", (1,), mesh_dim_names=("fsdp",))
for layer in model.model.layers:
    fully_shard(layer, mesh=mesh)
fully_shard(model, mesh=mesh)
manager = FSDPCheckpointManager(model, None, None, AutoTokenizer.from_pretrained(path),
                                checkpoint_config={"save_contents": ["model"], "load_contents": ["model"]})
manager.save_checkpoint(os.path.join(sys.argv[1], "global_step_2", "actor"), global_step=2)
open(os.path.join(sys.argv[1], "latest_checkpointed_iteration.txt"), "w").write("2")
dist.destroy_process_group()
"""


def test_export_real_verl_fsdp_checkpoint(tmp_path):
    require("verl", "the `train` extra")
    import torch
    from transformers import AutoModelForCausalLM

    from rearank.backends.base import Prompt, SamplingSettings
    from rearank.backends.models import embedded_model_path
    from rearank.backends.registry import make_backend
    from recipes.checks.export import export

    run_dir = tmp_path / "checkpoints" / "rearank" / "smoke"
    subprocess.run([sys.executable, "-c", textwrap.dedent(WRITE_CHECKPOINT), str(run_dir), "29517"], check=True,
                   cwd=ROOT, capture_output=True)
    out = tmp_path / "hf"
    actor = export(run_dir, out)
    assert actor == run_dir / "global_step_2" / "actor"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".hf.")]

    merged = AutoModelForCausalLM.from_pretrained(out, dtype=torch.bfloat16).state_dict()
    original = AutoModelForCausalLM.from_pretrained(embedded_model_path(), dtype=torch.float32).state_dict()
    assert merged.keys() == original.keys()
    for name, tensor in original.items():
        assert torch.equal(merged[name], tensor.to(torch.bfloat16)), name

    backend = make_backend("hf", str(out))
    messages = ({"role": "user", "content": "Say hi."},)
    [generation] = backend.generate([Prompt(messages=messages)], SamplingSettings(max_new_tokens=4))
    assert generation.completion_tokens >= 1
