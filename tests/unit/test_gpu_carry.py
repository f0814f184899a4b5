"""The GPU run's carry (recipes/gpu/carry.py: packing, Ray's trim, the project's entry points without an install) and
its figures writer and overrides (recipes/gpu/run.py). The run itself on CPU: tests/slow/test_gpu_run.py."""

from __future__ import annotations

import importlib.metadata
import json
import math
import stat

import pytest

from rearank.errors import RearankError
from recipes.gpu import carry, run


def test_pack_and_unpack_keep_the_run_bit_and_refuse_to_overwrite(tmp_path, capsys):
    folder = tmp_path / "stage"
    (folder / "site" / "ray" / "core").mkdir(parents=True)
    raylet = folder / "site" / "ray" / "core" / "raylet"
    raylet.write_bytes(b"#!/bin/sh\necho raylet\n" * 100)
    raylet.chmod(0o755)
    (folder / "assets").mkdir()
    (folder / "assets" / "train.parquet").write_bytes(b"rows" * 1000)
    out = tmp_path / "out" / "carry.tar.xz"
    size = carry.pack(folder, out)
    assert size == out.stat().st_size and 0 < size < 4000
    with pytest.raises(carry.CarryError, match="exists; pass --overwrite"):
        carry.pack(folder, out)
    assert [p.name for p in out.parent.iterdir()] == ["carry.tar.xz"]  # no temporary file left beside it

    target = carry.unpack(out, tmp_path / "target")
    unpacked = target / "site" / "ray" / "core" / "raylet"
    assert unpacked.read_bytes() == raylet.read_bytes()
    assert unpacked.stat().st_mode & stat.S_IXUSR
    assert (target / "assets" / "train.parquet").read_bytes() == b"rows" * 1000
    unpacked.write_text("changed")  # the same archive again: not unpacked a second time
    carry.unpack(out, target)
    assert unpacked.read_text() == "changed"
    assert carry.main(["unpack", str(tmp_path / "absent.tar.xz"), "--target", str(target)]) == 1
    assert "no such carry; build it with `python -m recipes.gpu.carry build`" in capsys.readouterr().err


def test_ray_trim_removes_the_unused_libraries_only(tmp_path):
    ray = tmp_path / "ray"
    for part in ("rllib", "tune", "dashboard/client/build", "dashboard/modules", "_private", "jars"):
        (ray / part).mkdir(parents=True)
    assert carry.trim_ray(tmp_path) == ["jars", "rllib", "tune", "dashboard/client"]
    assert sorted(p.name for p in ray.iterdir()) == ["_private", "dashboard"]
    assert [p.name for p in (ray / "dashboard").iterdir()] == ["modules"]


def test_the_carried_dist_info_gives_the_project_entry_points_without_an_install(tmp_path):
    carry.write_dist_info(tmp_path)
    dist = next(iter(importlib.metadata.distributions(path=[str(tmp_path)])))
    assert dist.metadata["Name"] == "rearank"
    points = {(ep.group, ep.name): ep.value for ep in dist.entry_points}
    assert points[("verl.plugins", "rearank_cpu")] == "recipes.verl_cpu"
    assert points[("rearank.commands", "rerank")] == "rearank.cli.rerank:register"
    assert points[("rearank.commands", "doctor")] == "rearank.cli.doctor:register"


def test_the_pins_are_those_of_this_environment():
    """The carry sends what the CPU runs here use: a drifting pin would send an untested combination."""
    for pin in (*carry.PINS, *carry.SOURCE_PINS):
        name, version = pin.split("==")
        assert importlib.metadata.version(name) == version, pin


ROWS = [{"training/global_step": step, "timing_s/step": 1.5 * step, "timing_s/gen": 0.5, "timing_s/update_actor": 0.2,
         "actor/pg_loss": -0.01 * step, "actor/kl_loss": 0.0, "actor/grad_norm": 2.0 + step,
         "critic/score/mean": 0.1, "response_length/mean": 30.0, "actor/perf/max_memory_allocated_gb": 1.0 + step / 10,
         "actor/perf/max_memory_reserved_gb": 2.0}
        for step in (1, 2, 3, 4)]


def test_figures_hold_each_step_and_the_peak_memory(tmp_path):
    doctor_rows = [{"name": "driver", "status": "ok", "found": "driver 580.95.05; torch built for CUDA 13.0 needs "
                    ">= 580.65.06", "todo": ""}, {"name": "gpus", "status": "ok", "found": "1 x NVIDIA H200"}]
    data = run.figures(ROWS, device={"kind": "cuda", "name": "NVIDIA H200"}, doctor_rows=doctor_rows,
                       versions={"torch": "2.11.0+cu130"}, runs_s=[61.23, 20.0], resumed_from=3, export_s=4.44,
                       rerank={"queries": 2, "lines": 20})
    assert data["steps"] == [1, 2, 3, 4] and data["resumed_from_step"] == 3
    assert data["grad_norm"] == [3.0, 4.0, 5.0, 6.0] and data["step_s"] == [1.5, 3.0, 4.5, 6.0]
    assert data["peak_memory_allocated_gb"] == 1.4 and data["peak_memory_reserved_gb"] == 2.0
    assert data["driver"].startswith("driver 580.95.05") and data["doctor"] == {"driver": "ok", "gpus": "ok"}
    assert data["runs_s"] == [61.2, 20.0] and data["export_s"] == 4.4
    assert any("vLLM" in line for line in data["differs_from_a_cluster_run"])

    path = run.write_figures(tmp_path / "gpu_train.json", data)
    assert json.loads(path.read_text()) == data
    with pytest.raises(RearankError, match="exists; pass --overwrite"):
        run.write_figures(path, {"other": 1})
    assert json.loads(path.read_text()) == data
    run.write_figures(path, {"other": 1}, overwrite=True)
    assert json.loads(path.read_text()) == {"other": 1}


def test_a_step_without_memory_figures_gives_none():
    rows = [{k: v for k, v in row.items() if "/perf/" not in k} for row in ROWS]
    data = run.figures(rows, device={}, doctor_rows=[], versions={}, runs_s=[], resumed_from=3, export_s=0.0,
                       rerank={})
    assert data["peak_memory_allocated_gb"] is None and data["peak_memory_reserved_gb"] is None
    assert data["driver"] is None
    assert all(math.isfinite(v) for v in data["pg_loss"])


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_the_overrides_reach_train_sh_without_a_key_given_twice(device, tmp_path, monkeypatch):
    """Hydra refuses a key given twice: the run's overrides leave train.sh's own keys to it."""
    monkeypatch.setattr(run, "fitted_prompt_tokens", lambda stage, data, model: 256)
    monkeypatch.setenv("REARANK_RL_DATA", str(tmp_path / "rl"))
    monkeypatch.setenv("CKPT_ROOT", str(tmp_path / "ckpt"))
    monkeypatch.setenv("ATTN_IMPL", "sdpa")
    settings = {"VERL_PLATFORM": "nvidia" if device == "cuda" else "cpu", "X": "a b"}
    argv = run.launch_commands("rearank", run.overrides(tmp_path, tmp_path / "ckpt", 3, device, settings),
                               run.RECIPES_DIR)[0].argv
    keys = [word.split("=", 1)[0].lstrip("+") for word in argv[argv.index("--config-name") + 2:]]
    assert len(keys) == len(set(keys)), sorted(k for k in keys if keys.count(k) > 1)
    assert f"data.train_files={tmp_path / 'rl'}/train.parquet" in argv
    assert f"trainer.default_local_dir={tmp_path / 'ckpt'}/${{trainer.project_name}}/${{trainer.experiment_name}}" in argv
    assert "actor_rollout_ref.rollout.name=transformers" in argv and "trainer.total_training_steps=3" in argv
    platform = "nvidia" if device == "cuda" else "cpu"
    assert f"++ray_kwargs.ray_init.runtime_env.env_vars.VERL_PLATFORM='{platform}'" in argv
    assert "++ray_kwargs.ray_init.runtime_env.env_vars.X='a b'" in argv
    precision = "param_dtype:bf16,reduce_dtype:fp32" if device == "cuda" else "param_dtype:fp32,reduce_dtype:fp32"
    assert sum(precision in word for word in argv) == 2  # actor and reference
    assert ("trainer.device=cuda" in argv) == (device == "cuda")


def test_gpu_memory_takes_the_peak_from_nvidia_smi(tmp_path, monkeypatch):
    readings = tmp_path / "readings"
    readings.write_text("1200\n4800\n2300\n")
    exe = tmp_path / "nvidia-smi"  # each call answers the next reading, the last one after that
    exe.write_text(f'#!/bin/sh\nline=$(head -1 {readings}); [ "$(wc -l < {readings})" -gt 1 ] && sed -i 1d {readings}; '
                   'echo "$line"\n')
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    with run.GpuMemory(every_s=0.01) as memory:
        import time

        deadline = time.monotonic() + 10
        while readings.read_text().count("\n") > 1 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert memory.peak_mib == 4800
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    with run.GpuMemory(every_s=0.01) as memory:
        pass
    assert memory.peak_mib is None


def _dist(site, name: str, *requires: str) -> None:
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", "Version: 1.0", *(f"Requires-Dist: {r}" for r in requires)]
    (info / "METADATA").write_text("\n".join(lines) + "\n")


def test_a_requirement_neither_carried_nor_on_the_machine_is_named_with_who_needs_it(tmp_path):
    site, machine = tmp_path / "site", tmp_path / "machine.txt"
    machine.write_text("# the machine\ntyping-extensions\nPyYAML  # a comment\n")
    _dist(site, "fastapi", "starlette", "opentelemetry-api>=1", "typing_extensions", "httpx; extra == 'all'")
    _dist(site, "starlette", "pyyaml", "uvloop; sys_platform == 'win32'", "wandb")
    _dist(site, "verl", "opentelemetry_api", "tensorboard; python_version < '3.8'")
    assert carry.missing_requirements(site, machine) == {"opentelemetry-api": ["fastapi", "verl"]}
    _dist(site, "opentelemetry-api", "typing-extensions")
    assert carry.missing_requirements(site, machine) == {}


def test_the_machine_list_holds_what_the_gpu_run_found_there():
    names = {line.split("#")[0].strip() for line in carry.MACHINE_PACKAGES.read_text().splitlines()}
    assert {"torch", "transformers", "pandas", "pyarrow", "typing-extensions"} <= names
    assert not {"ray", "verl", "fastapi", "opentelemetry-api"} & names  # what the carry must bring
