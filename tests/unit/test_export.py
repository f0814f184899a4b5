"""``python -m recipes.checks.export``: which checkpoint folder it takes, its refusals (an existing folder without
``--force``, a folder holding the checkpoint), and its errors, each leaving what was there untouched."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rearank.errors import MissingDataError, RearankError
from recipes.checks import export


def checkpoint(root: Path, steps=(10, 20), latest: str | None = "20") -> Path:
    """A verl run folder: global_step_N/actor with fsdp_config.json and huggingface/config.json."""
    for step in steps:
        actor = root / f"global_step_{step}" / "actor"
        (actor / "huggingface").mkdir(parents=True)
        (actor / "fsdp_config.json").write_text("{}")
        (actor / "huggingface" / "config.json").write_text("{}")
    if latest is not None:
        (root / export.TRACKER).write_text(latest + "\n")
    return root


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_actor_folder_of_a_run_a_step_or_an_actor(tmp_path):
    run = checkpoint(tmp_path / "run")
    assert export.actor_folder(run) == run / "global_step_20" / "actor"
    assert export.actor_folder(run, step=10) == run / "global_step_10" / "actor"
    assert export.actor_folder(run / "global_step_10") == run / "global_step_10" / "actor"
    assert export.actor_folder(run / "global_step_10" / "actor") == run / "global_step_10" / "actor"


@pytest.mark.parametrize(("latest", "step", "error", "message"), [
    (None, None, MissingDataError, "no latest_checkpointed_iteration.txt and no global_step_N/actor folder"),
    ("twenty", None, RearankError, "expected a step number, got 'twenty'"),
    ("30", None, MissingDataError, "global_step_30/actor: no verl FSDP actor checkpoint (fsdp_config.json) there"),
    ("20", 15, MissingDataError, "global_step_15/actor: no verl FSDP actor checkpoint"),
])
def test_a_checkpoint_that_is_not_there_is_named(tmp_path, latest, step, error, message):
    run = checkpoint(tmp_path / "run", latest=latest)
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        export.actor_folder(run, step)


def run_main(capsys, *argv: str) -> tuple[int, str]:
    code = export.main([str(a) for a in argv])
    return code, capsys.readouterr().err.strip()


def test_an_existing_folder_is_refused_without_force(tmp_path, capsys):
    run = checkpoint(tmp_path / "run")
    out = tmp_path / "hf"
    out.mkdir()
    (out / "model.safetensors").write_bytes(b"earlier export")
    code, err = run_main(capsys, run, "--output-dir", out)
    assert (code, err) == (2, f"export: {out} exists; remove it or pass --force to replace it")
    assert tree(out) == {"model.safetensors": b"earlier export"}


@pytest.mark.parametrize("where", ["run", "actor", "parent", "link"])
def test_a_folder_holding_the_checkpoint_is_refused_even_with_force(tmp_path, capsys, where):
    run = checkpoint(tmp_path / "run")
    (tmp_path / "link").symlink_to(run)
    out = {"run": run, "actor": run / "global_step_20" / "actor", "parent": tmp_path, "link": tmp_path / "link"}[where]
    before = tree(run)
    code, err = run_main(capsys, run, "--output-dir", out, "--force")
    assert code == 2 and err.startswith(f"export: --output-dir {out} holds the input ") and "Choose another" in err
    assert tree(run) == before


def test_an_actor_without_its_config_is_named_and_nothing_is_written(tmp_path, capsys):
    run = checkpoint(tmp_path / "run")
    (run / "global_step_20" / "actor" / "huggingface" / "config.json").unlink()
    out = tmp_path / "hf"
    code, err = run_main(capsys, run, "--output-dir", out)
    assert code == 2 and err.endswith("huggingface: no config.json; verl writes it with every checkpoint"), err
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no partial folder


def test_a_merge_without_weights_keeps_the_earlier_export(tmp_path, capsys, monkeypatch):
    run = checkpoint(tmp_path / "run")
    out = tmp_path / "hf"
    out.mkdir()
    (out / "model.safetensors").write_bytes(b"earlier export")
    monkeypatch.setattr(export, "merge", lambda actor, target: (target / "config.json").write_text("{}"))
    code, err = run_main(capsys, run, "--output-dir", out, "--force")
    assert code == 2 and re.fullmatch(rf"export: {re.escape(str(tmp_path))}/\.hf\.\w+\.partial: the merge wrote no "
                                      "model weights", err), err  # the temporary folder, removed since
    assert tree(out) == {"model.safetensors": b"earlier export"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf", "run"]
