"""This node's GPU stack (:mod:`rearank.machine.node`): the driver table, the readings from a fake ``nvidia-smi`` and a
``/proc`` file, and each check's verdict on injected readings; ``rearank doctor`` on them, exit code included."""

from __future__ import annotations

import argparse
import re
import stat
from pathlib import Path

import pytest

from rearank.cli import doctor
from rearank.machine import node

NODE_CHECKS = ("driver", "nccl", "gpus", "attention")


def fake_smi(folder: Path, driver: str, gpus: int, name: str = "NVIDIA H100 80GB HBM3") -> Path:
    """An ``nvidia-smi`` that answers the query the doctor makes, as the real one formats it."""
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "nvidia-smi"
    lines = "\n".join(f"{driver}, {name}" for _ in range(gpus))
    exe.write_text(f'#!/bin/sh\ncase "$*" in *--query-gpu=driver_version,name*) printf "%s\\n" "{lines}";; '
                   "*) exit 9;; esac\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return folder


def gpu_machine(monkeypatch, tmp_path: Path, driver: str, gpus: int, torch_cuda: str | None = "13.0") -> None:
    """A fake nvidia-smi first on PATH, and torch's build numbers as a CUDA build's (this venv's torch is CPU)."""
    monkeypatch.setenv("PATH", f"{fake_smi(tmp_path / 'bin', driver, gpus)}:/usr/bin:/bin")
    monkeypatch.setattr(node, "read_torch", lambda: (torch_cuda, "2.27.7" if torch_cuda else None))


def doctor_on_node_checks(argv: list[str], monkeypatch, capsys) -> tuple[int, str]:
    monkeypatch.setattr(doctor, "CHECKS", {name: doctor.CHECKS[name] for name in NODE_CHECKS})
    parser = argparse.ArgumentParser(prog="rearank")
    doctor.register(parser.add_subparsers())
    args = parser.parse_args(["doctor", *argv])
    code = args.func(args)
    return code, capsys.readouterr().out


@pytest.mark.parametrize("cuda, needed", [("13.0", "580.65.06"), ("13.2", "580.65.06"), ("12.8", "570.26"),
                                          ("12.6", "560.28.03"), ("12.7", "560.28.03"), ("12.4", "550.54.14"),
                                          ("12.1", "530.30.02"), ("11.8", "520.61.05")])
def test_the_driver_each_cuda_build_needs(cuda, needed):
    assert node.min_driver(cuda) == needed


def test_a_cuda_major_the_table_lacks_is_a_failure_that_says_where_to_look():
    assert node.min_driver("14.0") is None and node.min_driver("10.2") is None
    finding = node.check_driver(node.Node("590.10", ("H100",), "14.0", "2.28", None))
    assert finding.status == node.FAIL and "Table 3" in finding.todo


def test_nvidia_smi_and_proc_readings(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(fake_smi(tmp_path / "bin", "580.95.05", 2)))
    assert node.read_nvidia_smi() == ("580.95.05", ("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"))
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert node.read_nvidia_smi() == (None, ())
    proc = tmp_path / "version"
    proc.write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.133.20  Release Build  "
                    "(dvs-builder@U16-I3-B03-4-3)  Fri Mar 14 2025\nGCC version:  gcc version 13.3.0\n")
    assert node.read_proc_driver(proc) == "570.133.20"
    assert node.read_proc_driver(tmp_path / "absent") is None


def test_a_driver_too_old_for_the_torch_build_fails_the_doctor(monkeypatch, tmp_path, capsys):
    gpu_machine(monkeypatch, tmp_path, "550.54.14", 8)
    code, out = doctor_on_node_checks([], monkeypatch, capsys)
    assert code == 1
    assert re.search(r"^driver +FAIL +driver 550\.54\.14; torch built for CUDA 13\.0 needs >= 580\.65\.06$", out,
                     re.MULTILINE)
    assert "-> install an NVIDIA driver >= 580.65.06" in out and "needs attention: driver" in out


def test_a_matching_driver_and_enough_gpus_pass(monkeypatch, tmp_path, capsys):
    gpu_machine(monkeypatch, tmp_path, "580.95.05", 8)
    code, out = doctor_on_node_checks(["--gpus-per-node", "8", *(f"--check={n}" for n in NODE_CHECKS)], monkeypatch,
                                      capsys)
    assert code == 0, out
    assert "driver 580.95.05; torch built for CUDA 13.0 needs >= 580.65.06" in out
    assert "NCCL 2.27.7" in out and "8 x NVIDIA H100 80GB HBM3; the recipe wants 8 per node" in out


def test_fewer_gpus_than_the_recipe_wants_fail(monkeypatch, tmp_path, capsys):
    gpu_machine(monkeypatch, tmp_path, "580.95.05", 4)
    code, out = doctor_on_node_checks(["--gpus-per-node", "8"], monkeypatch, capsys)
    assert code == 1
    assert re.search(r"^gpus +FAIL +4 x NVIDIA H100 80GB HBM3; the recipe wants 8 per node$", out, re.MULTILINE)
    assert "trainer.n_gpus_per_node=4" in out


def test_no_gpu_is_reported_plainly_and_fails_only_when_asked_for(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.setattr(node, "PROC_VERSION", tmp_path / "absent")
    code, out = doctor_on_node_checks([], monkeypatch, capsys)
    assert code == 0, out
    assert "no NVIDIA driver on this machine" in out and "no GPU on this machine" in out
    assert doctor_on_node_checks(["--check", "driver"], monkeypatch, capsys)[0] == 1


def test_nccl_and_attention_verdicts():
    cpu = node.Node(None, (), None, None, None)
    assert node.check_nccl(cpu).status == node.MISSING
    assert node.check_nccl(node.Node("580.1", ("H100",), "13.0", None, None)).status == node.FAIL
    assert node.check_attention(cpu) == (node.OK, node.check_attention(cpu).found, "")
    assert "sdpa" in node.check_attention(cpu).found
    assert node.check_attention(node.Node(None, (), None, None, "2.8.3")).found == \
        "flash_attention_2: flash-attn 2.8.3 imports"
    broken = node.check_attention(node.Node(None, (), None, None, "error: flash-attn 2.8.3: ImportError: undefined "
                                             "symbol"))
    assert broken.status == node.FAIL and "undefined symbol" in broken.found and "sdpa" in broken.todo


def test_a_cpu_torch_with_a_driver_is_missing_not_failed():
    finding = node.check_driver(node.Node("580.95.05", ("H100",), None, None, None))
    assert finding.status == node.MISSING and "make setup-gpu" in finding.todo
