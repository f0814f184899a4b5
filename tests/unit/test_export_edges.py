"""``recipes.checks.export`` edges found by mutation testing: what verl's merger is given, the checks of the merged
folder (against a stand-in for transformers), a replaced export, the messages and the command line's options."""

from __future__ import annotations

import io
import re
import sys
from types import ModuleType, SimpleNamespace

import pytest

from rearank.errors import MissingDataError, RearankError
from recipes.checks import export
from tests.unit.test_export import checkpoint, tree

TEMPLATE = "{{ messages }}"


class Recorder:
    """Stands in for verl's merger and transformers' auto classes: records what each is called with."""

    def __init__(self, chat_template=TEMPLATE):
        self.calls, self.chat_template = [], chat_template

    def install(self, monkeypatch):
        recorder = self

        class Merger:
            def __init__(self, config):
                recorder.calls.append(("merger", config))

            def merge_and_save(self):
                recorder.calls.append(("merge_and_save",))

            def cleanup(self):
                recorder.calls.append(("cleanup",))

        def config_from(folder):
            recorder.calls.append(("config", folder))

        def tokenizer_from(folder):
            recorder.calls.append(("tokenizer", folder))
            return SimpleNamespace(**({} if recorder.chat_template is None else {"chat_template": recorder.chat_template}))

        modules = {"verl": {}, "verl.model_merger": {},
                   "verl.model_merger.base_model_merger": {"ModelMergerConfig": lambda **kw: kw},
                   "verl.model_merger.fsdp_model_merger": {"FSDPModelMerger": Merger},
                   "transformers": {"AutoConfig": SimpleNamespace(from_pretrained=config_from),
                                    "AutoTokenizer": SimpleNamespace(from_pretrained=tokenizer_from)}}
        for name, attributes in modules.items():
            module = ModuleType(name)
            module.__dict__.update(attributes)
            monkeypatch.setitem(sys.modules, name, module)
        return self


@pytest.fixture
def fakes(monkeypatch):
    return Recorder().install(monkeypatch)


def test_the_merger_gets_the_actor_and_its_huggingface_config(tmp_path, fakes):
    actor = checkpoint(tmp_path / "run") / "global_step_20" / "actor"
    export.merge(actor, tmp_path / "target")
    assert fakes.calls == [("merger", {"operation": "merge", "backend": "fsdp", "local_dir": str(actor),
                                       "target_dir": str(tmp_path / "target"),
                                       "hf_model_config_path": str(actor / "huggingface")}),
                           ("merge_and_save",), ("cleanup",)]


@pytest.mark.parametrize("weights", ["model.safetensors", "pytorch_model.bin"])
def test_either_kind_of_weights_with_config_and_template_passes(tmp_path, fakes, weights):
    (tmp_path / weights).write_bytes(b"w")
    export.check_hf_folder(tmp_path)
    assert fakes.calls == [("config", tmp_path), ("tokenizer", tmp_path)]


@pytest.mark.parametrize("template", [None, ""])
def test_a_tokenizer_without_a_chat_template_is_refused(tmp_path, monkeypatch, template):
    Recorder(chat_template=template).install(monkeypatch)
    (tmp_path / "model.safetensors").write_bytes(b"w")
    with pytest.raises(RearankError, match=re.escape(f"{tmp_path}: the tokenizer has no chat template; the "
                                                     "checkpoint's huggingface/ folder lacks it")):
        export.check_hf_folder(tmp_path)


def merged(actor, target):
    (target / "model.safetensors").write_bytes(b"new weights")


def test_force_replaces_an_earlier_export_and_main_says_how_to_use_it(tmp_path, fakes, monkeypatch, capsys):
    run, out = checkpoint(tmp_path / "run"), tmp_path / "hf"
    out.mkdir()
    (out / "old.bin").write_bytes(b"earlier export")
    monkeypatch.setattr(export, "merge", merged)
    assert export.main([str(run), "--output-dir", str(out), "--step", "10", "--force"]) == 0
    actor = run / "global_step_10" / "actor"
    first, *rest = capsys.readouterr().out.splitlines()
    assert re.fullmatch(rf"\+ python -m verl\.model_merger merge --backend fsdp --local_dir {re.escape(str(actor))} "
                        rf"--target_dir {re.escape(str(tmp_path))}/\.hf\.\w+\.partial", first), first
    assert rest == [f"exported {actor} -> {out}", f"use it: rearank rerank --model {out} --backend hf|vllm ..."]
    assert tree(out) == {"model.safetensors": b"new weights"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf", "run"]


def test_the_command_line_is_flushed_before_the_merge_starts(tmp_path, fakes, monkeypatch):
    stdout, seen = io.StringIO(), []
    monkeypatch.setattr(stdout, "flush", lambda: seen.append("flushed"))
    monkeypatch.setattr(sys, "stdout", stdout)
    monkeypatch.setattr(export, "merge", lambda actor, target: (seen.append("merge"), merged(actor, target)))
    export.export(checkpoint(tmp_path / "run"), tmp_path / "hf")
    assert seen == ["flushed", "merge"]


def test_export_takes_the_step_given_and_refuses_to_replace_by_default(tmp_path, fakes, monkeypatch):
    run = checkpoint(tmp_path / "run")
    monkeypatch.setattr(export, "merge", merged)
    assert export.export(run, tmp_path / "hf", step=10) == run / "global_step_10" / "actor"
    with pytest.raises(RearankError, match=re.escape(f"{tmp_path / 'hf'} exists; remove it or pass --force")):
        export.export(run, tmp_path / "hf")


@pytest.mark.parametrize(("where", "named"), [("run", "CHECKPOINT"), ("run/global_step_20/actor", "its actor folder")])
def test_the_input_an_output_folder_holds_is_named(tmp_path, where, named):
    run = checkpoint(tmp_path / "run")
    given = {"CHECKPOINT": run, "its actor folder": run / "global_step_20" / "actor"}[named]
    with pytest.raises(RearankError, match=re.escape(f"--output-dir {tmp_path / where} holds the input {named} "
                                                     f"({given}); replacing it would destroy the input.")):
        export.export(run, tmp_path / where, force=True)


def test_the_missing_tracker_message_says_what_to_pass(tmp_path):
    with pytest.raises(MissingDataError) as caught:
        export.actor_folder(tmp_path)
    assert str(caught.value) == (f"{tmp_path}: no latest_checkpointed_iteration.txt and no global_step_N/actor "
                                 "folder; pass the run folder that `trainer.default_local_dir` points to, or --step N")


def test_a_long_tracker_is_quoted_to_40_characters(tmp_path):
    (tmp_path / export.TRACKER).write_text("  " + "x" * 39 + "yz\n")
    with pytest.raises(RearankError) as caught:
        export.actor_folder(tmp_path)
    assert str(caught.value) == f"{tmp_path / export.TRACKER}: expected a step number, got '{'x' * 39}y'"


def test_the_help_names_every_option(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit):
        export.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert text.startswith("usage: ") and "[-h] --output-dir DIR [--step STEP] [--force] checkpoint" in text
    for words in [("Export a verl FSDP actor checkpoint to a Hugging Face folder that ``rearank rerank --model DIR`` "
                   "loads. positional"), "checkpoint run folder, global_step_N folder or its actor folder",
                  "--output-dir DIR Hugging Face folder to write",
                  "--step STEP global step to export (default: the latest checkpoint)",
                  "--force replace --output-dir if it exists"]:
        assert words in text, words


@pytest.mark.parametrize(("argv", "message"), [
    (["run"], "the following arguments are required: --output-dir"),
    (["run", "--output-dir", "hf", "--forc"], "unrecognized arguments: --forc"),  # no abbreviations
    (["run", "--output-dir", "hf", "--step", "ten"], "argument --step: invalid int value: 'ten'"),
])
def test_bad_command_lines_are_refused_by_the_parser(capsys, argv, message):
    with pytest.raises(SystemExit) as caught:
        export.main(argv)
    assert caught.value.code == 2 and capsys.readouterr().err.rstrip().endswith(f"error: {message}")
