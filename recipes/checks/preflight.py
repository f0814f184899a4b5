"""``make train-preflight RECIPE=<name>``: check a recipe on a CPU machine before a GPU cluster is booked.

It takes the commands ``DRY_RUN=1 RECIPE=<name> recipes/train.sh [overrides]`` prints (so the same data paths,
attention kernel and Ray settings the launch would use) and, for each, checks:

* ``config``: the full Hydra config through verl's own validation (``validate_config``, the dataclass configs);
* ``env``: every ``${oc.env:NAME}`` without a default is set (here or in the Ray ``runtime_env``); the values used;
* ``files``: data files, a reward or dataset class given by file, a local model folder;
* ``model``: the model built on the meta device with the recipe's settings (attention kernel, dtype, LoRA) and
  verl's ``apply_monkey_patch`` on it, as verl's FSDP engine does on every build;
* ``data``: the first rows through verl's dataset class (``RLHFDataset``, or the SFT recipe's class);
* ``reward``: the reward function as verl loads it (path, name, ``reward_kwargs``) scoring those rows;
* ``versions``: installed packages against the tested set (:data:`TESTED`, the table in docs/training.md);
* ``gpus`` (each command), ``driver``, ``nccl``, ``attention`` (this node, :mod:`rearank.machine.node`): the node's GPUs
  against the command's ``trainer.n_gpus_per_node``, the NVIDIA driver against torch's CUDA build, NCCL, flash-attn
  or SDPA; ``skip`` on a machine without a GPU, so run it again on a GPU node before the launch.

Offline (huggingface.co does not answer within a few seconds) it sets ``HF_HUB_OFFLINE=1`` for the run, so that
models load from the local cache at once instead of after the hub client's retries.

One table of checks; exit status 1 when any check failed.

    python -m recipes.checks.preflight RECIPE [overrides...] [--rows N] [--recipes-dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import importlib.util
import inspect
import json
import math
import os
import re
import shlex
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rearank.machine import node
from recipes import RECIPES_DIR
from recipes.checks.completions import warm_start_texts
from recipes.checks.table import Stage, stage_of_reward

#: Packages checked against what the project ran: (specifier, needed here). Keep docs/training.md's table in step
#: (tests/integration/test_preflight.py compares them).
TESTED = {
    "verl": ("==0.9.1", True),
    "torch": (">=2.11,<2.14", True),
    "transformers": (">=4.51,<5.11", True),
    "ray": (">=2.40", True),
    "TransferQueue": ("==0.1.*", True),
    "peft": (">=0.15", False),
    "trl": (">=0.20", False),
    "vllm": (">=0.12,<0.25", False),
    "flash-attn": (">=2.7", False),
}
#: The rows about this node (:mod:`rearank.machine.node`); ``skip`` on a machine without a GPU.
NODE_CHECKS = ("gpus", "driver", "nccl", "attention")
ENV = re.compile(r"\$\{oc\.env:([A-Za-z_][A-Za-z0-9_]*)(?:,([^}]*))?\}")


class CheckError(Exception):
    """A check failed; its message is the table's one-line detail."""


@dataclass
class Row:
    command: str
    check: str
    status: str
    detail: str


@dataclass
class Command:
    """One command of the launch: its kind (``ppo``, ``sft``, ``rrpo``) and arguments."""

    kind: str
    label: str
    argv: list[str]

    def option(self, name: str) -> str:
        return self.argv[self.argv.index(name) + 1]

    def overrides(self) -> list[str]:
        """The Hydra overrides (or ``--set`` values) after the config options."""
        if self.kind == "rrpo":
            return [self.argv[i + 1] for i, word in enumerate(self.argv) if word == "--set"]
        return self.argv[self.argv.index("--config-name") + 2:]


def launch_commands(recipe: str, overrides: Sequence[str], recipes_dir: Path) -> list[Command]:
    """The commands ``DRY_RUN=1 RECIPE=recipe train.sh overrides`` prints."""
    script = recipes_dir / "train.sh"
    proc = subprocess.run([str(script), *overrides], capture_output=True, text=True, check=False,
                          env={**os.environ, "DRY_RUN": "1", "RECIPE": recipe, "PYTHON": sys.executable})
    if proc.returncode:
        lines = proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"]
        raise CheckError(lines[-1])
    commands = []
    for line in proc.stdout.splitlines():
        if not line.startswith("+ "):
            continue
        argv = shlex.split(line[2:])
        if "verl.trainer.main_ppo" in argv:
            kind = "ppo"
        elif "verl.trainer.sft_trainer" in argv:
            kind = "sft"
        elif argv[1:5] == ["-m", "rearank", "rag", "rrpo"] or "rrpo" in argv[:6]:
            kind = "rrpo"
        else:
            continue
        config = argv[argv.index("--config-name") + 1] if "--config-name" in argv else Path(
            argv[argv.index("--config") + 1]).stem
        folder = Path(argv[argv.index("--config-dir") + 1]).name if "--config-dir" in argv else "rrpo"
        commands.append(Command(kind, f"{folder}/{config}", argv))
    if not commands:
        raise CheckError(f"RECIPE={recipe}: train.sh printed no verl or RRPO command (the BAR-RAG loop: preflight "
                         "RECIPE=barrag_selector and RECIPE=barrag_generator)")
    return commands


def compose(command: Command) -> Any:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=command.option("--config-dir"), version_base=None):
        return hydra_compose(config_name=command.option("--config-name"),
                             overrides=["hydra.searchpath=[pkg://verl.trainer.config]", *command.overrides()])


# ------------------------------------------------------------------------------------------------------- checks


def check_env(config: Any, command: Command) -> str:
    """Every ``${oc.env:NAME}`` without a default is set; returns the values the recipe reads."""
    from omegaconf import OmegaConf

    runtime = {}
    if command.kind == "ppo":
        runtime = dict(OmegaConf.select(config, "ray_kwargs.ray_init.runtime_env.env_vars") or {})
    used, missing = {}, []
    for key, value in _leaves(OmegaConf.to_container(config, resolve=False)):
        for name, default in ENV.findall(str(value)):
            if name in runtime or name in os.environ:
                used[name] = runtime.get(name, os.environ.get(name))
            elif default:
                used[name] = f"{default} (default)"
            else:
                missing.append(f"{name} ({key})")
    if missing:
        raise CheckError(f"not set: {', '.join(missing)}; export it before launching (train.sh passes it to every "
                         "Ray worker)")
    OmegaConf.to_container(config, resolve=True)
    return ", ".join(f"{k}={v}" for k, v in sorted(used.items())) or "none read"


def check_config(config: Any, command: Command) -> str:
    from verl.utils.config import omega_conf_to_dataclass

    if command.kind == "ppo":
        from omegaconf import open_dict

        from recipes.checks.check import validate_grpo

        validated, note = config, ""
        if config.actor_rollout_ref.model.get("lora_rank", 0) and importlib.util.find_spec("vllm") is None:
            validated = config.copy()  # verl checks the vLLM version of a LoRA run: a GPU-environment check
            with open_dict(validated):
                validated.actor_rollout_ref.model.lora_rank = 0
            note = "; LoRA's vLLM version check left to the GPU environment (no vLLM here)"
        rollout, gpus = validate_grpo(config, validated, reward=False)  # the reward check loads it
        return (f"verl validate_config: {gpus} GPU(s) on {config.trainer.nnodes} node(s), "
                f"{config.data.train_batch_size} prompts x {rollout.n} rollouts{note}")
    for key in ("model", "engine", "optim", "checkpoint"):
        omega_conf_to_dataclass(config[key])
    return f"verl SFT configs: {config.trainer.nnodes} node(s) x {config.trainer.n_gpus_per_node} GPU(s)"


def _model_config(config: Any, command: Command) -> Any:
    return config.actor_rollout_ref.model if command.kind == "ppo" else config.model


def check_files(config: Any, command: Command) -> str:
    from omegaconf import OmegaConf

    data = config.data
    paths = [*_as_list(data.train_files), *_as_list(data.val_files)]
    custom = OmegaConf.select(config, "reward.custom_reward_function.path")
    if custom and not str(custom).startswith("pkg://"):
        paths.append(custom)
    dataset_cls = OmegaConf.select(config, "data.custom_cls.path")
    if dataset_cls and not str(dataset_cls).startswith("pkg://"):
        paths.append(dataset_cls)
    model = str(_model_config(config, command).path)
    if model.startswith(("/", ".", "~")):
        paths.append(str(Path(model).expanduser() / "config.json"))
    absent = [str(p) for p in paths if not Path(p).expanduser().is_file()]
    if absent:
        raise CheckError(f"missing: {', '.join(absent)} (data: `rearank synth`, docs/training.md; REARANK_RL_DATA "
                         "names its folder)")
    return f"{len(paths)} present"


def check_model(config: Any, command: Command) -> str:
    """The model on the meta device with the recipe's attention kernel, LoRA and verl's model patches."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from verl.models.transformers.monkey_patch import apply_monkey_patch

    model_cfg = _model_config(config, command)
    override = dict(model_cfg.get("override_config") or {})
    attn = override.pop("attn_implementation", "flash_attention_2")
    here = attn
    if attn == "flash_attention_2" and importlib.util.find_spec("flash_attn") is None:
        here = "sdpa"  # flash-attn is a GPU package: the GPU nodes need it, the shape check does not
    hf_config = AutoConfig.from_pretrained(str(model_cfg.path), trust_remote_code=bool(model_cfg.get(
        "trust_remote_code", False)))
    for key, value in override.items():
        setattr(hf_config, key, value)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(hf_config, attn_implementation=here, dtype=torch.bfloat16)
    parameters = sum(p.numel() for p in model.parameters())
    lora = int(model_cfg.get("lora_rank", 0) or 0)
    if lora:
        from peft import LoraConfig, get_peft_model

        targets = model_cfg.get("target_modules", "all-linear")
        targets = targets if isinstance(targets, str) else list(targets)
        model = get_peft_model(model, LoraConfig(r=lora, lora_alpha=int(model_cfg.get("lora_alpha", 16)),
                                                 target_modules=targets))
    apply_monkey_patch(model=model, use_remove_padding=bool(model_cfg.get("use_remove_padding", False)),
                       ulysses_sp_size=int(_select(config, "actor_rollout_ref.actor.ulysses_sequence_parallel_size",
                                                   1) or 1))
    note = f"{attn}" + (" (flash-attn is not here: shapes checked with sdpa)" if here != attn else "")
    size = f"{parameters / 1e9:.2f}B" if parameters >= 1e9 else f"{parameters / 1e6:.1f}M"
    kind = type(model.base_model.model if lora else model).__name__ + (f" + LoRA rank {lora}" if lora else "")
    return f"{kind}, {size} parameters on meta, attention {note}, verl's apply_monkey_patch ok"


def first_rows(config: Any, command: Command, rows: int) -> tuple[list[dict], str]:
    """The first ``rows`` rows through verl's dataset class, as the trainer builds it."""
    from omegaconf import open_dict
    from verl.utils.config import omega_conf_to_dataclass

    model = omega_conf_to_dataclass(_model_config(config, command))
    if command.kind == "sft":
        from verl.trainer.sft_trainer import create_sft_dataset

        dataset = create_sft_dataset(_as_list(config.data.train_files), config.data, model.tokenizer, model.processor,
                                     max_samples=rows)
        items = [dataset[i] for i in range(min(rows, len(dataset)))]
        return items, f"{len(items)} rows through {type(dataset).__name__}"
    from verl.trainer.ppo.utils import create_rl_dataset

    data = config.data.copy()
    with open_dict(data):
        data.train_max_samples = rows
    dataset = create_rl_dataset(config.data.train_files, data, model.tokenizer, model.processor, is_train=True)
    items = [dataset[i] for i in range(min(rows, len(dataset)))]
    if not items:
        raise CheckError(f"no row of {config.data.train_files} fits max_prompt_length={config.data.max_prompt_length}")
    return items, f"{len(items)} rows through {type(dataset).__name__} (max_prompt_length {data.max_prompt_length})"


def check_reward(config: Any, items: list[dict]) -> str:
    """The reward as verl loads it, on the rows' ground truth: a finite score for each completion kind."""
    from verl.trainer.ppo.reward import get_custom_reward_fn

    reward = config.reward.custom_reward_function
    try:
        fn = get_custom_reward_fn(config)
    except (ImportError, AttributeError, FileNotFoundError, ModuleNotFoundError) as err:
        raise CheckError(f"reward.custom_reward_function {reward.path}:{reward.name}: {err}") from None
    if fn is None:
        raise CheckError("reward.custom_reward_function.path is not set")
    stage = stage_of_reward(str(reward.path), str(reward.name))
    if stage is not None and stage.name == "barrag_selector":
        url = str(reward.reward_kwargs.reader_url).rstrip("/")
        try:
            urllib.request.urlopen(f"{url}/models", timeout=3).read()
        except OSError as err:
            return f"SKIP: the reader at {url} does not answer here ({err}); it is served on the cluster"
    scores = []
    for item in items:
        truth = item["reward_model"]["ground_truth"]
        for text in _completions(stage, truth):
            out = fn(data_source=item.get("data_source", "preflight"), solution_str=text, ground_truth=truth,
                     extra_info=item.get("extra_info"))
            if inspect.isawaitable(out):
                out = asyncio.run(_awaited(out))
            score = out["score"] if isinstance(out, dict) else out
            if not isinstance(score, (int, float)) or not math.isfinite(score):
                raise CheckError(f"{reward.path}:{reward.name} returned {out!r}")
            scores.append(float(score))
    return (f"{reward.path}:{reward.name} scored {len(scores)} completions of {len(items)} rows "
            f"(min {min(scores):.3f}, max {max(scores):.3f})")


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _completions(stage: Stage | None, truth: Any) -> list[str]:
    if stage is None:
        return ["", "<answer>[1]</answer>"]
    return warm_start_texts(stage.name, truth if isinstance(truth, str) else json.dumps(truth))


def check_versions() -> str:
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    found, bad = [], []
    for name, (spec, needed) in TESTED.items():
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            if needed:
                bad.append(f"{name} not installed (tested {spec})")
            continue
        if Version(version.split("+")[0]) not in SpecifierSet(spec):
            bad.append(f"{name} {version} (tested {spec})")
        else:
            found.append(f"{name} {version}")
    if bad:
        raise CheckError("; ".join(bad) + ": pip install the tested versions (docs/training.md)")
    return ", ".join(found)


def check_rrpo(command: Command) -> list[tuple[str, Callable[[], str]]]:
    def config() -> str:
        from rearank.flags import backend_options
        from rearank.rag.rrpo.trainer import RRPOConfig

        parsed = RRPOConfig.from_yaml(command.option("--config"), backend_options(command.overrides()))
        return f"RRPOConfig: k {parsed.k}, {parsed.epochs} epochs, lr {parsed.lr}"

    def files() -> str:
        sets = dict(kv.split("=", 1) for kv in command.overrides() if "=" in kv)
        paths = [sets[k] for k in ("data", "eval_data") if sets.get(k) not in (None, "null")]
        absent = [p for p in paths if not Path(p).is_file()]
        if absent:
            raise CheckError(f"missing: {', '.join(absent)} (set REARANK_DATA to the shared data packs)")
        return f"{len(paths)} present"

    return [("config", config), ("files", files)]


def node_row(finding: node.Finding) -> str:
    """A :mod:`rearank.machine.node` finding as a check's detail: ``missing`` (nothing to check here) is a skip."""
    if finding.status == node.FAIL:
        raise CheckError(f"{finding.found}; {finding.todo}")
    return finding.found if finding.status == node.OK else f"SKIP: {finding.found} ({finding.todo})"


def hub_offline(timeout_s: float = 3.0) -> str | None:
    """Set ``HF_HUB_OFFLINE=1`` when the Hugging Face hub (``$HF_ENDPOINT``) does not answer, and say so; None when
    it answers or ``HF_HUB_OFFLINE`` is already set. Offline, every model load otherwise waits ~25 s in the hub
    client's retries before it falls back to the cache."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip():
        return None
    url = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout_s).close()
    except urllib.error.HTTPError:
        return None  # it answered
    except (OSError, ValueError) as err:
        os.environ["HF_HUB_OFFLINE"] = "1"
        return (f"preflight: {url} does not answer ({type(err).__name__}); HF_HUB_OFFLINE=1 for this run: models "
                "load from the local cache (export HF_HUB_OFFLINE=1 to skip this probe)")
    return None


# -------------------------------------------------------------------------------------------------- the table


def run(recipe: str, overrides: Sequence[str], rows: int = 4, recipes_dir: Path = RECIPES_DIR) -> list[Row]:
    """Every check of every command of the recipe's launch; a failed check is a row, never an exception."""
    table: list[Row] = []

    def attempt(label: str, check: str, fn: Callable[..., str], *args: Any) -> bool:
        try:
            detail = fn(*args)
        except CheckError as err:
            table.append(Row(label, check, "FAIL", str(err)))
            return False
        except Exception as err:  # noqa: BLE001 -- a library's error is the check's finding
            table.append(Row(label, check, "FAIL", f"{type(err).__name__}: {_one_line(err)}"))
            return False
        status = "skip" if detail.startswith("SKIP: ") else "ok"
        table.append(Row(label, check, status, detail.removeprefix("SKIP: ")))
        return True

    here = node.read()
    commands: list[Command] = []
    if not attempt(f"RECIPE={recipe}", "launch", _launch, recipe, overrides, recipes_dir, commands):
        return table
    for command in commands:
        label = command.label
        if command.kind == "rrpo":
            for check, fn in check_rrpo(command):
                attempt(label, check, fn)
            continue
        holder: dict[str, Any] = {}
        if not attempt(label, "compose", _compose_into, command, holder):
            continue
        config = holder["config"]
        if not attempt(label, "env", check_env, config, command):
            continue
        attempt(label, "config", check_config, config, command)
        attempt(label, "gpus", _gpus_row, here, config)
        files_ok = attempt(label, "files", check_files, config, command)
        attempt(label, "model", check_model, config, command)
        if files_ok and attempt(label, "data", _rows_into, config, command, rows, holder) and command.kind == "ppo":
            attempt(label, "reward", check_reward, config, holder["rows"])
    attempt("installed", "versions", check_versions)
    for check, judge in (("driver", node.check_driver), ("nccl", node.check_nccl),
                         ("attention", node.check_attention)):
        attempt("this node", check, _node_judged, judge, here)
    return table


def _launch(recipe: str, overrides: Sequence[str], recipes_dir: Path, out: list[Command]) -> str:
    out.extend(launch_commands(recipe, overrides, recipes_dir))
    return "train.sh dry run: " + ", ".join(f"{c.label} ({c.kind})" for c in out)


def _gpus_row(here: node.Node, config: Any) -> str:
    return node_row(node.check_gpus(here, int(config.trainer.n_gpus_per_node)))


def _node_judged(judge: Callable[[node.Node], node.Finding], here: node.Node) -> str:
    return node_row(judge(here))


def _compose_into(command: Command, holder: dict) -> str:
    holder["config"] = compose(command)
    return f"{command.option('--config-dir')}/{command.option('--config-name')}.yaml"


def _rows_into(config: Any, command: Command, rows: int, holder: dict) -> str:
    holder["rows"], detail = first_rows(config, command, rows)
    return detail


def _as_list(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, (list, tuple)) or hasattr(value, "__iter__") and not \
        isinstance(value, str) else [str(value)]


def _leaves(node: Any, prefix: str = ""):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _leaves(value, f"{prefix}[{i}]")
    else:
        yield prefix, node


def _select(config: Any, key: str, default: Any) -> Any:
    from omegaconf import OmegaConf

    value = OmegaConf.select(config, key)
    return default if value is None else value


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return text[:300] + ("..." if len(text) > 300 else "")


def render(table: Sequence[Row]) -> str:
    widths = [max(len(f), *(len(getattr(r, f)) for r in table)) for f in ("command", "check", "status")]
    lines = [f"{'command':<{widths[0]}}  {'check':<{widths[1]}}  {'status':<{widths[2]}}  detail"]
    for row in table:
        lines.append(f"{row.command:<{widths[0]}}  {row.check:<{widths[1]}}  {row.status:<{widths[2]}}  {row.detail}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recipe", help="a recipes/train.sh RECIPE name (rearank, grouprank, barrag_selector, ...) "
                        "or a recipe file as folder/file under the recipes folder")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, as recipes/train.sh takes them")
    parser.add_argument("--rows", type=int, default=4, help="data rows read and scored (4)")
    parser.add_argument("--recipes-dir", type=Path, default=RECIPES_DIR,
                        help="the recipes folder whose train.sh and files to check (default: this checkout's)")
    args = parser.parse_args(argv)
    offline = hub_offline()
    if offline:
        print(offline, flush=True)
    table = run(args.recipe, args.overrides, args.rows, args.recipes_dir.resolve())
    print(render(table), flush=True)
    failed = [row for row in table if row.status == "FAIL"]
    if failed:
        print(f"preflight: {len(failed)} check(s) failed; first: {failed[0].command} {failed[0].check}: "
              f"{failed[0].detail}", file=sys.stderr)
        return 1
    skipped = sorted({row.check for row in table if row.status == "skip" and row.check in NODE_CHECKS})
    print(f"preflight: RECIPE={args.recipe} ready to launch ({len(table)} checks)" + (
        f"; {', '.join(skipped)} skipped (no GPU here): run it again on a GPU node, or `rearank doctor --check "
        "driver --check nccl --gpus-per-node N` on each node" if skipped else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
