"""recipes/grouprank/sft.yaml with the real verl: it composes against verl's SFT config, its configs build as
verl's SFT trainer builds them, the teacher-labelled SFT parquet loads through verl's SFT dataset with the loss on
the teacher's reasons and scores, and (slow) one real SFT step on CPU leaves the huggingface/ folder GRPO starts
from."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, data_root, require, require_pack

require("verl", "the `train` extra")

SECOND_RUN = "second.trec"


@pytest.fixture(scope="module")
def labels(tmp_path_factory) -> Path:
    """Small teacher-labelled data from dl21 (oracle teachers; the second run is the BM25 run reversed in score,
    a stand-in retriever that disagrees with BM25 everywhere: this test needs rows, not a good hybrid)."""
    pack = require_pack("msmarco-v2-passage/dl21")
    out = tmp_path_factory.mktemp("sft-data")
    lines = (pack / "run.bm25.top100.trec").read_text().splitlines()
    second = out.parent / SECOND_RUN
    second.write_text("".join(f"{q} Q0 {d} {r} {-float(s)} reversed\n" for q, _, d, r, s, _ in map(str.split, lines)))
    done = subprocess.run(
        [sys.executable, "-m", "rearank", "synth", "--labels", "grouprank", "--dataset", "dl21", "--second-run",
         str(second), "--teacher", "oracle", "--max-queries", "4", "--pool-size", "10", "--set-size", "4",
         "--samples-per-query", "2", "--output-dir", str(out), "--tokenizer", "none", "--quiet"],
        capture_output=True, text=True, check=False, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "REARANK_DATA": str(data_root())})
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture(scope="module")
def model_dir() -> Path:
    from recipes.checks.models import tiny_base

    return tiny_base()


def compose_sft(overrides=()):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "recipes" / "grouprank"), version_base=None):
        return compose(config_name="sft", overrides=["hydra.searchpath=[pkg://verl.trainer.config]", *overrides])


def test_sft_recipe_composes_and_its_configs_build_as_verl_builds_them(labels, model_dir):
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.config import FSDPEngineConfig, FSDPOptimizerConfig, HFModelConfig

    config = compose_sft([f"model.path={model_dir}", f"data.train_files={labels}/sft_train.parquet",
                          f"data.val_files={labels}/sft_val.parquet"])
    model, engine, optim = (omega_conf_to_dataclass(config[k]) for k in ("model", "engine", "optim"))
    omega_conf_to_dataclass(config.checkpoint)
    omega_conf_to_dataclass(config.profiler)
    assert isinstance(model, HFModelConfig) and isinstance(engine, FSDPEngineConfig)
    assert isinstance(optim, FSDPOptimizerConfig) and optim.lr == 1.0e-5
    assert "hf_model" in config.checkpoint.save_contents  # the folder grpo.yaml starts from
    assert config.data.max_token_len_per_gpu >= config.data.max_length
    assert compose_sft().model.path == "Qwen/Qwen2.5-7B-Instruct"


def test_sft_rows_load_through_verls_sft_dataset_with_the_loss_on_the_teachers_answer(labels, model_dir):
    from verl.trainer.sft_trainer import create_sft_dataset
    from verl.utils.config import omega_conf_to_dataclass

    config = compose_sft([f"model.path={model_dir}", "data.max_length=4096"])
    model = omega_conf_to_dataclass(config.model)
    dataset = create_sft_dataset([str(labels / "sft_train.parquet")], config.data, model.tokenizer, None)
    assert len(dataset) > 0
    item = dataset[0]
    ids, mask = item["input_ids"].tolist(), item["loss_mask"].tolist()
    target = model.tokenizer.decode([t for t, m in zip(ids, mask) if m])
    assert "<reason>" in target and "The judged grade is" in target  # the teacher's rationale is trained on
    assert re.search(r'<answer>\{"\[1\]": \d+', target)
    assert "Received document" not in target  # prompt turns carry no loss


@pytest.mark.slow
def test_one_real_sft_step_on_cpu_saves_the_model_grpo_starts_from(labels, model_dir, tmp_path):
    from recipes.checks.cpu import sft_cpu_overrides

    ckpt = tmp_path / "ckpt"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1",
           "-m", "verl.trainer.sft_trainer", "--config-dir", str(ROOT / "recipes" / "grouprank"), "--config-name",
           "sft", f"data.train_files={labels}/sft_train.parquet", f"data.val_files={labels}/sft_val.parquet",
           f"trainer.default_local_dir={ckpt}", "trainer.n_gpus_per_node=1",
           # CPU sizes and plumbing only (TRAIN_DEVICE=cpu recipes/train.sh's): one process, no flash-attn (sdpa,
           # padding kept), FSDP2, no compile
           "model.use_remove_padding=false", "model.override_config.attn_implementation=sdpa",
           *sft_cpu_overrides(model_dir, 1)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=tmp_path, timeout=1200,
                          env={**os.environ, "VERL_PLATFORM": "cpu", "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    step = re.search(r"step:1 - .*train/loss:([\d.]+) - train/grad_norm:([\d.]+)", done.stdout + done.stderr)
    assert step, done.stdout[-3000:]
    loss, grad = float(step.group(1)), float(step.group(2))
    assert math.isfinite(loss) and loss > 0 and math.isfinite(grad) and grad > 0
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == "1"
    assert (ckpt / "global_step_1" / "huggingface" / "model.safetensors").is_file()
