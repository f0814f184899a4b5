"""BAR-RAG's loop (recipes/barrag/loop.py): its plan, and the state machine run with fake stages (kill, resume)."""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path

import pytest

from rearank.errors import RearankError
from recipes.barrag.loop import STATE_FILE, Settings, Stage, main, plan, run_loop


class Killed(Exception):
    """Stands for the loop's process dying in the middle of a stage."""


class FakeRunner:
    """Writes each stage's output instead of running its command; dies at the stage named ``kill_at``."""

    def __init__(self, kill_at: str | None = None) -> None:
        self.kill_at = kill_at
        self.ran: list[str] = []
        self.served: list[str] = []
        self.envs: dict[str, dict] = {}
        self.serving: str | None = None

    def run(self, stage: Stage, env: dict[str, str]) -> None:
        if stage.name == self.kill_at:
            raise Killed(stage.name)
        assert (stage.reader is not None) == (self.serving is not None)  # the reader is up exactly when needed
        self.ran.append(stage.name)
        self.envs[stage.name] = env
        out = Path(stage.output)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("x")

    @contextmanager
    def serve(self, model: str):
        self.served.append(model)
        self.serving = model
        try:
            yield "http://127.0.0.1:9/v1"
        finally:
            self.serving = None


def settings(tmp_path: Path, **kw) -> Settings:
    return Settings(**{"out": str(tmp_path / "loop"), "model": "base-model", "qa": ("qa.json",), **kw})


def test_plan_chains_models_through_three_iterations(tmp_path):
    stages = plan(settings(tmp_path))
    names = [s.name for s in stages]
    per_iteration = ["train_selector", "export_selector", "select", "generator_rows", "train_generator",
                     "export_generator"]
    assert names == ["selector_rows"] + [f"iter{i}/{n}" for i in (1, 2, 3) for n in per_iteration]
    by_name = {s.name: s for s in stages}
    root = (tmp_path / "loop").resolve()
    # the reader of iteration i is the generator of iteration i-1 (the base model first); nothing else reads
    assert [s.reader for s in stages if s.reader] == ["base-model", f"{root}/iter1/generator/model",
                                                      f"{root}/iter2/generator/model"]
    # the selector and the generator each start from their own previous iteration
    assert f"actor_rollout_ref.model.path={root}/iter1/selector/model" in by_name["iter2/train_selector"].command
    assert f"actor_rollout_ref.model.path={root}/iter1/generator/model" in by_name["iter2/train_generator"].command
    # generator rows are synthesized on this iteration's selections
    rows = by_name["iter2/generator_rows"].command
    assert rows[rows.index("--evidence") + 1] == f"{root}/iter2/selections.jsonl"
    assert "--config-name" in by_name["iter1/train_selector"].command
    assert by_name["iter1/train_selector"].command[by_name["iter1/train_selector"].command.index("--config-name") + 1] \
        == "selector_grpo"


def test_given_selector_rows_replace_the_synthesis(tmp_path):
    stages = plan(settings(tmp_path, selector_data=str(tmp_path / "filtered"), iterations=1))
    assert stages[0].name == "iter1/train_selector"
    assert f"data.train_files={(tmp_path / 'filtered').resolve()}/train.parquet" in stages[0].command


def test_a_killed_loop_resumes_at_the_stage_it_died_in(tmp_path):
    s = settings(tmp_path, iterations=2)
    first = FakeRunner(kill_at="iter2/select")
    with pytest.raises(Killed):
        run_loop(s, first, log=lambda line: None)
    state = json.loads((tmp_path / "loop" / STATE_FILE).read_text())
    assert list(state["done"]) == first.ran
    assert first.ran[-1] == "iter2/export_selector"

    second = FakeRunner()
    run_loop(s, second, log=lambda line: None)
    assert second.ran == ["iter2/select", "iter2/generator_rows", "iter2/train_generator", "iter2/export_generator"]
    assert second.served == []  # iteration 2's selector had finished: its reader is not started again
    assert len(json.loads((tmp_path / "loop" / STATE_FILE).read_text())["done"]) == 1 + 6 * 2

    third = FakeRunner()
    run_loop(s, third, log=lambda line: None)
    assert third.ran == []


def test_the_reader_is_served_for_selector_training_only(tmp_path):
    runner = FakeRunner()
    run_loop(settings(tmp_path, iterations=1), runner, log=lambda line: None)
    assert runner.served == ["base-model"]
    assert runner.envs["iter1/train_selector"]["BARRAG_READER_URL"] == "http://127.0.0.1:9/v1"
    assert "BARRAG_READER_URL" not in runner.envs["iter1/train_generator"]


def test_a_finished_stage_whose_output_vanished_runs_again(tmp_path):
    s = settings(tmp_path, iterations=1)
    run_loop(s, FakeRunner(), log=lambda line: None)
    Path(plan(s)[2].output).unlink()  # iter1/export_selector's model folder is gone
    again = FakeRunner()
    run_loop(s, again, log=lambda line: None)
    assert again.ran == ["iter1/export_selector"]


def test_a_stage_that_writes_nothing_stops_the_loop(tmp_path):
    class Silent(FakeRunner):
        def run(self, stage, env):
            self.ran.append(stage.name)

    with pytest.raises(RearankError, match="selector_rows finished without writing"):
        run_loop(settings(tmp_path), Silent(), log=lambda line: None)


def test_other_settings_or_a_broken_state_file_are_refused(tmp_path):
    run_loop(settings(tmp_path, iterations=1), FakeRunner(), log=lambda line: None)
    with pytest.raises(RearankError, match="started with other settings"):
        run_loop(settings(tmp_path, iterations=1, model="other"), FakeRunner(), log=lambda line: None)
    (tmp_path / "loop" / STATE_FILE).write_text("{not json")
    with pytest.raises(RearankError, match=STATE_FILE):
        run_loop(settings(tmp_path, iterations=1), FakeRunner(), log=lambda line: None)


def test_dry_run_prints_every_command(tmp_path, capsys):
    assert main(["--dry-run", "--out", str(tmp_path / "loop"), "--qa", "qa.json", "--model", "m"]) == 0
    out = capsys.readouterr().out
    for i in (1, 2, 3):
        for name in ("train_selector", "export_selector", "select", "generator_rows", "train_generator",
                     "export_generator"):
            assert f"# iter{i}/{name}\n" in out
    assert out.count("verl.trainer.main_ppo") == 6
    assert out.count("vllm serve") == 3
    assert not (tmp_path / "loop").exists()  # nothing ran


def test_bad_iterations_is_a_one_line_error(tmp_path, capsys):
    assert main(["--iterations", "0", "--out", str(tmp_path), "--qa", "q"]) == 1
    assert capsys.readouterr().err.strip() == "barrag loop: --iterations must be at least 1"


def test_on_gpus_the_reader_listens_on_every_interface_and_reaches_every_ray_worker(tmp_path, monkeypatch):
    """Reward workers may run on any node: vLLM binds 0.0.0.0, the URL names this machine's address (or
    BARRAG_READER_HOST), and verl's command hands it to every worker through the runtime_env."""
    from recipes.barrag.loop import _with_runtime_env, reader_host, serve_command

    gpu = settings(tmp_path, device="gpu")
    assert serve_command(gpu, "m", 8000)[serve_command(gpu, "m", 8000).index("--host") + 1] == "0.0.0.0"
    monkeypatch.setenv("BARRAG_READER_HOST", "10.0.0.7")
    assert reader_host(gpu) == "10.0.0.7"
    monkeypatch.delenv("BARRAG_READER_HOST")
    assert reader_host(settings(tmp_path, device="cpu")) == "127.0.0.1" and reader_host(gpu) != ""
    env = {"BARRAG_READER_URL": "http://10.0.0.7:8000/v1", "BARRAG_READER_MODEL": "reader", "OTHER": "x"}
    command = _with_runtime_env(["python", "-m", "verl.trainer.main_ppo", "a=1"], env)
    assert command[4:] == ["++ray_kwargs.ray_init.runtime_env.env_vars.BARRAG_READER_URL='http://10.0.0.7:8000/v1'",
                           "++ray_kwargs.ray_init.runtime_env.env_vars.BARRAG_READER_MODEL='reader'"]
    assert _with_runtime_env(["python", "-m", "recipes.checks.export"], env) == ["python", "-m", "recipes.checks.export"]
