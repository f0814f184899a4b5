"""BAR-RAG's three-iteration training loop as one resumable command (``make train RECIPE=barrag``).

Before the loop, once: the selector rows (``rearank synth --method barrag-selector``). Then, for iteration i = 1..N,
with S_0 = G_0 = the base model:

1. serve G_{i-1} as the reader (an OpenAI-compatible server: ``vllm serve`` on GPUs,
   ``python -m rearank.backends.chat_server`` on CPU) while
2. the selector S_i trains from S_{i-1} (``recipes/barrag/selector_grpo.yaml``; its reward asks the reader);
3. S_i is exported to a Hugging Face folder (``recipes.checks.export``);
4. S_i selects evidence for every question of the selector rows (``select`` below: ``{"qid", "pids"}`` JSONL);
5. generator rows are synthesized on that evidence (``rearank synth --method barrag-generator --evidence``);
6. the generator G_i trains from G_{i-1} (``recipes/barrag/generator_grpo.yaml``) and
7. is exported.

Every finished stage is recorded in ``<out>/loop_state.json`` (write-then-rename) with the settings the loop was
started with; a rerun of the same command skips the finished stages and continues with the first unfinished
one. A training stage killed half-way starts again from verl's latest checkpoint (``trainer.resume_mode=auto``).
``--dry-run`` prints every command of the loop without running anything.

``--device cpu`` runs the same loop on CPU through verl's CPU plugin (``recipes.verl_cpu``, as
``make train-cpu``): the recipe files with only size overrides (``recipes.checks.cpu.size_overrides``), a few
QA questions, one training step per stage, and the tiny model by default. It checks the mechanics, never quality.

    python -m recipes.barrag.loop --out runs/barrag [--device gpu|cpu] [--iterations 3] [--model M] [--dry-run]
    python -m recipes.barrag.loop select --data DIR --model M --output selections.jsonl   (stage 4 alone)
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol

from rearank.errors import MissingDataError, RearankError
from rearank.io.files import atomic_write, parse_json, read_text
from rearank.testing.ports import free_port
from recipes.checks.serving import stop, wait_until_answering

STATE_FILE = "loop_state.json"
QA_FILES = ("qa/hotpotqa/train_distractor.sample100.json", "qa/musique/train_ans.sample100.json")
READER_NAME = "reader"


@dataclass(frozen=True)
class Settings:
    """What decides the loop's commands; recorded in the state file, so a rerun with other settings is refused."""

    out: str
    device: str = "gpu"
    iterations: int = 3
    model: str = "Qwen/Qwen2.5-7B-Instruct"
    qa: tuple[str, ...] = ()
    qa_limit: int | None = None
    debug: bool = False
    selector_data: str | None = None
    python: str = sys.executable

    @property
    def root(self) -> Path:
        return Path(self.out)


@dataclass(frozen=True)
class Stage:
    """One step of the loop: a command, the path it leaves when it succeeded, and the model the reader serves
    while it runs (None: no reader)."""

    name: str
    command: tuple[str, ...]
    output: str
    reader: str | None = None
    env: dict[str, str] = field(default_factory=dict)


# ----------------------------------------------------------------------------------------------------- the plan


def _recipe(settings: Settings, stage: str) -> tuple[str, str]:
    """(config dir, config name) of a BAR-RAG stage's recipe file."""
    from recipes import RECIPES_DIR

    name = f"{stage}_grpo_debug" if settings.debug else f"{stage}_grpo"
    return str(RECIPES_DIR / "barrag"), name


def _train(settings: Settings, stage: str, data: Path, model: str, ckpt: Path, iteration: int) -> tuple[str, ...]:
    """``verl.trainer.main_ppo`` for one BAR-RAG stage: the recipe's values, this iteration's data, initial model and
    checkpoint folder (on CPU also the size overrides and CPU plumbing of ``make train-cpu``, one step)."""
    config_dir, config_name = _recipe(settings, stage)
    head = (settings.python, "-m", "verl.trainer.main_ppo", "--config-dir", config_dir, "--config-name", config_name)
    if settings.device == "cpu":
        from recipes.checks.cpu import size_overrides
        from recipes.checks.table import STAGES

        cpu_stage = STAGES[f"barrag_{stage}"]
        overrides = size_overrides(cpu_stage, data, Path(model), ckpt, 1)
        if stage == "selector":  # the reader's answers: a few tokens on CPU (1,024 in the recipe)
            overrides.append("reward.custom_reward_function.reward_kwargs.reader_max_tokens=16")
        return (*head, *overrides)
    return (*head, f"data.train_files={data}/train.parquet", f"data.val_files={data}/val.parquet",
            f"actor_rollout_ref.model.path={model}", f"trainer.default_local_dir={ckpt}",
            f"trainer.experiment_name=barrag-{stage}-iter{iteration}", "trainer.resume_mode=auto")


def _qa_args(settings: Settings) -> tuple[str, ...]:
    limit = ("--qa-limit", str(settings.qa_limit)) if settings.qa_limit else ()
    return (*(a for path in settings.qa for a in ("--qa", path)), *limit)


def plan(settings: Settings) -> list[Stage]:
    """Every stage of the loop, in order."""
    root = settings.root.resolve()
    py = settings.python
    stages = []
    if settings.selector_data:  # given rows, e.g. filtered by `rearank rag barrag filter`
        selector_data = Path(settings.selector_data).resolve()
    else:
        selector_data = root / "data" / "selector"
        stages.append(Stage("selector_rows", (py, "-m", "rearank", "synth", "--method", "barrag-selector",
                                              *_qa_args(settings), "--output-dir", str(selector_data), "--overwrite",
                                              "--quiet"), str(selector_data / "train.parquet")))
    selector, generator = settings.model, settings.model
    env = {"VERL_PLATFORM": "cpu", "TOKENIZERS_PARALLELISM": "false"} if settings.device == "cpu" else {}
    for i in range(1, settings.iterations + 1):
        it = root / f"iter{i}"
        reader = generator  # G_{i-1}
        selector = _trained(settings, "selector", selector_data, selector, i, stages, reader, env)
        selections = it / "selections.jsonl"
        stages.append(Stage(f"iter{i}/select",
                            (py, "-m", "recipes.barrag.loop", "select", "--data", str(selector_data), "--model",
                             selector, "--backend", "hf" if settings.device == "cpu" else "vllm",
                             *(("--max-new-tokens", "32") if settings.device == "cpu" else ()),
                             "--output", str(selections)), str(selections)))
        gen_data = it / "generator_data"
        stages.append(Stage(f"iter{i}/generator_rows",
                            (py, "-m", "rearank", "synth", "--method", "barrag-generator", *_qa_args(settings),
                             "--evidence", str(selections), "--output-dir", str(gen_data), "--overwrite", "--quiet"),
                            str(gen_data / "train.parquet")))
        generator = _trained(settings, "generator", gen_data, generator, i, stages, None, env)
    return stages


def _trained(settings: Settings, role: str, data: Path, model: str, iteration: int, stages: list[Stage],
             reader: str | None, env: dict[str, str]) -> str:
    """Add the stages that train ``role`` (selector or generator) from ``model`` on ``data`` in ``iteration`` and
    export it (the reader serving ``reader`` meanwhile); return the exported model's folder."""
    folder = settings.root.resolve() / f"iter{iteration}" / role
    checkpoints, exported = folder / "checkpoints", str(folder / "model")
    stages.append(Stage(f"iter{iteration}/train_{role}", _train(settings, role, data, model, checkpoints, iteration),
                        str(checkpoints / "latest_checkpointed_iteration.txt"), reader, env))
    stages.append(Stage(f"iter{iteration}/export_{role}",
                        (settings.python, "-m", "recipes.checks.export", str(checkpoints), "--output-dir", exported,
                         "--force"), str(Path(exported) / "config.json")))
    return exported


def serve_command(settings: Settings, model: str, port: int) -> tuple[str, ...]:
    """The reader server's command: vLLM on GPUs, bound to every interface (reward workers may run on any node of
    the Ray cluster), rearank's small OpenAI-compatible server on CPU (one machine: loopback)."""
    if settings.device == "cpu":
        return (settings.python, "-m", "rearank.backends.chat_server", "--backend", "hf", "--model", model,
                "--served-name", READER_NAME, "--port", str(port))
    return ("vllm", "serve", model, "--served-model-name", READER_NAME, "--host", "0.0.0.0", "--port", str(port),
            "--gpu-memory-utilization", "0.3")


def reader_host(settings: Settings) -> str:
    """The address the reader is advertised at: ``$BARRAG_READER_HOST``, else on GPUs this machine's address on its
    default route (what other nodes reach), on CPU loopback."""
    if os.environ.get("BARRAG_READER_HOST"):
        return os.environ["BARRAG_READER_HOST"]
    if settings.device == "cpu":
        return "127.0.0.1"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(("10.255.255.255", 1))  # no packet is sent: this only picks the outgoing interface
            return sock.getsockname()[0]
        except OSError:
            return socket.gethostbyname(socket.gethostname())


# ---------------------------------------------------------------------------------------------- state and runner


class Runner(Protocol):
    """Runs the loop's stages: a stage's command, and the reader server around the stages that need it."""

    def run(self, stage: Stage, env: dict[str, str]) -> None: ...

    def serve(self, model: str) -> contextmanager: ...


def load_state(path: Path, settings: Settings) -> dict:
    """The state file (a fresh one when absent); refuses a file written by a loop with other settings."""
    if not path.exists():
        return {"settings": asdict(settings), "done": {}}
    state = parse_json(read_text(path), path)
    if not isinstance(state, dict) or not isinstance(state.get("done"), dict):
        raise RearankError(f"{path}: not a BAR-RAG loop state file (expected {{'settings', 'done'}}); "
                           "remove it to start the loop over")
    if state.get("settings") != json.loads(json.dumps(asdict(settings))):
        raise RearankError(f"{path}: the loop in {path.parent} was started with other settings "
                           f"({state.get('settings')}); rerun with those, or use another --out")
    return state


def save_state(path: Path, state: dict) -> None:
    with atomic_write(path) as out:
        out.write(json.dumps(state, indent=1) + "\n")


def run_loop(settings: Settings, runner: Runner, stages: Sequence[Stage] | None = None,
             log: Callable[[str], None] = print) -> dict:
    """Run every stage not yet finished, recording each as it finishes; returns the state."""
    stages = plan(settings) if stages is None else stages
    path = settings.root / STATE_FILE
    settings.root.mkdir(parents=True, exist_ok=True)
    state = load_state(path, settings)
    for stage in stages:
        if stage.name in state["done"] and Path(stage.output).exists():
            log(f"[done] {stage.name}")
            continue
        log(f"[run ] {stage.name}")
        started = time.perf_counter()
        if stage.reader is not None:
            with runner.serve(stage.reader) as url:
                runner.run(stage, {**stage.env, "BARRAG_READER_URL": url, "BARRAG_READER_MODEL": READER_NAME})
        else:
            runner.run(stage, dict(stage.env))
        if not Path(stage.output).exists():
            raise RearankError(f"stage {stage.name} finished without writing {stage.output}")
        state["done"][stage.name] = {"output": stage.output, "seconds": round(time.perf_counter() - started, 1)}
        save_state(path, state)
    log(f"BAR-RAG loop complete: {settings.iterations} iteration(s); selector "
        f"{settings.root / f'iter{settings.iterations}' / 'selector' / 'model'}, generator "
        f"{settings.root / f'iter{settings.iterations}' / 'generator' / 'model'}; state {path}")
    return state


def _with_runtime_env(command: Sequence[str], env: dict[str, str]) -> list[str]:
    """A verl command with the reader's address for every Ray worker (verl's runtime_env): on a cluster the reward
    workers do not inherit this process's environment."""
    if "verl.trainer.main_ppo" not in command:
        return list(command)
    from recipes.checks.cpu import runtime_env

    return [*command, *runtime_env({k: v for k, v in env.items() if k.startswith("BARRAG_READER_")})]


class SubprocessRunner:
    """Runs each stage as a child process, its output appended to ``<out>/logs/<stage>.log``."""

    def __init__(self, settings: Settings, startup_s: float = 600.0) -> None:
        self.settings, self.startup_s = settings, startup_s
        self.logs = settings.root / "logs"

    def _log(self, name: str) -> Path:
        self.logs.mkdir(parents=True, exist_ok=True)
        return self.logs / f"{name.replace('/', '.')}.log"

    def run(self, stage: Stage, env: dict[str, str]) -> None:
        log = self._log(stage.name)
        with log.open("a", encoding="utf-8") as out:
            out.write("+ " + shlex.join(stage.command) + "\n")
            out.flush()
            code = subprocess.run(_with_runtime_env(stage.command, env), stdout=out, stderr=subprocess.STDOUT,
                                  env={**os.environ, **env}, check=False).returncode
        if code:
            tail = "".join(read_text(log).splitlines(True)[-15:])
            raise RearankError(f"stage {stage.name} exited with {code}; log {log}; rerun the same command to continue "
                               f"from this stage. Its end:\n{tail}")

    @contextmanager
    def serve(self, model: str) -> Iterator[str]:
        port = free_port()
        log = self._log(f"reader.{port}")
        command = serve_command(self.settings, model, port)
        with log.open("a", encoding="utf-8") as out:
            out.write("+ " + shlex.join(command) + "\n")
            out.flush()
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        url = f"http://{reader_host(self.settings)}:{port}/v1"
        try:
            wait_until_answering(url, proc, self.startup_s, 0.5, lambda: f"log {log} ({shlex.join(command)})")
            yield url
        finally:
            stop(proc, 30)


def print_plan(settings: Settings, stages: Sequence[Stage]) -> None:
    """Every command of the loop, the reader server's before the stages that read it."""
    for stage in stages:
        print(f"# {stage.name}")
        if stage.reader is not None:
            print("+ " + shlex.join(serve_command(settings, stage.reader, 8000)) + "   # reader, in the background")
            print("+ " + " ".join(f"{k}={shlex.quote(v)}" for k, v in
                                  {**stage.env, "BARRAG_READER_URL": "http://127.0.0.1:8000/v1",
                                   "BARRAG_READER_MODEL": READER_NAME}.items()) + " \\")
        elif stage.env:
            print("+ " + " ".join(f"{k}={shlex.quote(v)}" for k, v in stage.env.items()) + " \\")
        print("  " + shlex.join(stage.command) if stage.env or stage.reader else "+ " + shlex.join(stage.command))


# ---------------------------------------------------------------------------------------------- stage 4: select


def select_evidence(data: Path, model: str, output: Path, backend: str = "hf", max_new_tokens: int = 1024,
                    batch_size: int = 8) -> dict[str, int]:
    """The selector ``model`` answers every row of ``data``'s train and val parquet (the prompts synthesis wrote);
    its choices are written as ``{"qid", "pids"}`` JSONL (write-then-rename). An unparseable answer gets the first
    five shown candidates (the first stage's top 5, BAR-RAG's default evidence), counted as ``fallback``."""
    import pandas as pd

    from rearank.backends.base import Prompt, SamplingSettings
    from rearank.backends.registry import make_backend
    from rearank.methods.barrag.parser import parse_selection
    from rearank.methods.barrag.prompt import SELECT_K
    from rearank.rag.readers import complete

    paths = [data / name for name in ("train.parquet", "val.parquet") if (data / name).is_file()]
    if not paths:
        raise MissingDataError(f"{data}: no train.parquet; make it with `rearank synth --method barrag-selector`")
    rows = pd.concat([pd.read_parquet(p) for p in paths], ignore_index=True)
    prompts = [Prompt(messages=tuple(dict(m) for m in row.prompt), qid=row.extra_info["qid"]) for row in rows.itertuples()]
    texts = complete(make_backend(backend, model), prompts, SamplingSettings(max_new_tokens=max_new_tokens), batch_size)
    counts = {"questions": len(texts), "fallback": 0}
    with atomic_write(output) as out:
        for row, text in zip(rows.itertuples(), texts):
            shown = list(row.extra_info["pids"])
            ids = parse_selection(text, len(shown)).ids
            if not ids:
                counts["fallback"] += 1
            pids = [shown[i - 1] for i in ids] if ids else shown[:SELECT_K]
            out.write(json.dumps({"qid": row.extra_info["qid"], "pids": pids}) + "\n")
    return counts


def _select_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m recipes.barrag.loop select",
                                     description="A BAR-RAG selector's evidence for every question of a barrag-selector "
                                     "parquet folder, as {qid, pids} JSONL (rearank synth --evidence reads it).")
    parser.add_argument("--data", required=True, type=Path, help="folder with train.parquet (rearank synth --method "
                        "barrag-selector)")
    parser.add_argument("--model", required=True, help="the selector: a Hugging Face folder or hub id")
    parser.add_argument("--output", required=True, type=Path, help="JSONL to write")
    parser.add_argument("--backend", default="hf", help="hf (default), vllm, or openai")
    parser.add_argument("--max-new-tokens", type=int, default=1024, help="selector answer budget (1024)")
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args(argv)
    try:
        counts = select_evidence(args.data, args.model, args.output, args.backend, args.max_new_tokens,
                                 args.batch_size)
    except RearankError as err:
        print(f"barrag select: {err}", file=sys.stderr)
        return 1
    print(f"{counts['questions']} selections -> {args.output} ({counts['fallback']} unparseable: first-stage top 5)")
    return 0


# ------------------------------------------------------------------------------------------------------- driver


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Settings with the device's defaults: the shared QA samples; on CPU the tiny model and 8 questions a file."""
    from rearank.data.packs import data_root

    qa = tuple(args.qa) if args.qa else tuple(str(data_root().resolve() / q) for q in QA_FILES)
    missing = [q for q in qa if not args.dry_run and not Path(q).is_file()]
    if missing:
        raise MissingDataError(f"QA file not found: {missing[0]} (set REARANK_DATA to the shared data folder, or "
                               "give --qa FILE)")
    model = args.model
    qa_limit = args.qa_limit
    if args.device == "cpu":
        from rearank.cache import cache_root
        from recipes.checks.models import TINY_FOLDER, model_path, tiny_base

        model = model or "tiny"
        if model == "tiny":  # make train-cpu's random model of SmolLM2's architecture (a dry run only names it)
            model = str(cache_root() / "models" / TINY_FOLDER) if args.dry_run else str(tiny_base())
        else:
            model = str(model_path(model))
        qa_limit = qa_limit or 8
    return Settings(out=str(args.out.resolve()), device=args.device, iterations=args.iterations,
                    model=model or Settings.model, qa=qa, qa_limit=qa_limit, debug=args.debug,
                    selector_data=str(args.selector_data.resolve()) if args.selector_data else None,
                    python=args.python or sys.executable)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["select"]:
        return _select_main(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("runs/barrag"), help="the loop's folder (state, models, logs)")
    parser.add_argument("--device", choices=("gpu", "cpu"), default="gpu",
                        help="gpu: the recipes as they are; cpu: verl's CPU plugin, one step a stage")
    parser.add_argument("--iterations", type=int, default=3, help="selector/generator iterations (BAR-RAG: 3)")
    parser.add_argument("--model", help="base model of both selector and generator (gpu: Qwen/Qwen2.5-7B-Instruct; "
                        "cpu: tiny, smollm2 or a Hugging Face folder)")
    parser.add_argument("--qa", action="append", help="QA file (repeatable; default: the shared HotpotQA and MuSiQue "
                        "samples)")
    parser.add_argument("--qa-limit", type=int, help="first N questions of each QA file (cpu default: 8)")
    parser.add_argument("--selector-data", type=Path, metavar="DIR",
                        help="selector rows to train on, e.g. filtered by `rearank rag barrag filter` (default: "
                        "`rearank synth --method barrag-selector` of the QA files, unfiltered)")
    parser.add_argument("--debug", action="store_true", help="the one-GPU *_debug recipe files")
    parser.add_argument("--python", help="interpreter of the training environment (default: this one)")
    parser.add_argument("--dry-run", action="store_true", help="print every command of the loop and exit")
    args = parser.parse_args(argv)
    try:
        if args.iterations < 1:
            raise RearankError("--iterations must be at least 1")
        settings = settings_from_args(args)
        stages = plan(settings)
        if args.dry_run:
            print_plan(settings, stages)
            return 0
        run_loop(settings, SubprocessRunner(settings), stages)
    except RearankError as err:
        print(f"barrag loop: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
