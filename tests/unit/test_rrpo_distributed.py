"""RRPO as Algorithm 1: the clip acts once the policy has moved (after the first mini-batch), and data-parallel
training on 2 gloo ranks (torchrun, the real CLI) ends with the parameters of a single-process run."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
import yaml

from rearank.backends.scorer import PointwiseScorer
from rearank.rag.readers import GoldReader
from rearank.rag.rrpo import trainer as trainer_module
from rearank.rag.rrpo.distributed import Group
from rearank.rag.rrpo.objective import clipped_surrogate
from rearank.rag.rrpo.trainer import build_trainer
from tests.conftest import ROOT
from tests.unit.test_rrpo_trainer import config, qa_file, tiny_model  # noqa: F401 (a fixture)


def test_the_clip_acts_after_the_first_mini_batch(tmp_path, tiny_model, monkeypatch):  # noqa: F811
    trainer = build_trainer(config(tmp_path, tiny_model, lr=0.05, batch_size=3, mini_batch_size=1, ppo_epochs=2),
                            GoldReader())
    episodes = trainer.collect(trainer.items[:3])
    seen = []  # (pi_theta log-probs, pi_old log-probs) of each episode's loss, in update order
    real_loss = trainer_module.rrpo_loss

    def recording(logp, logp_old, *args, **kwargs):
        seen.append((logp.detach(), logp_old))
        return real_loss(logp, logp_old, *args, **kwargs)

    monkeypatch.setattr(trainer_module, "rrpo_loss", recording)
    figures = trainer.update(episodes)
    assert figures["updates"] == len(seen) == 6  # 2 PPO epochs x 3 mini-batches of one episode
    ratios = [torch.exp(logp - old) for logp, old in seen]
    # the first mini-batch is scored by the rollout policy itself: ratio 1, clipped objective = unclipped one
    assert torch.allclose(ratios[0], torch.ones_like(ratios[0]))
    # later mini-batches see the moved policy; where a ratio leaves [0.8, 1.2] (an advantage of the same sign as
    # the move), the clipped objective is not the unclipped one
    assert all(not torch.allclose(r, torch.ones_like(r)) for r in ratios[1:])
    assert figures["clip_frac"] > 0
    differs = []
    for (logp, old), r in zip(seen[1:], ratios[1:]):
        adv = torch.where(r >= 1, 1.0, -1.0)
        differs.append(not torch.allclose(clipped_surrogate(logp, old, adv), r * adv))
    assert any(differs)


@pytest.mark.slow  # three trainer processes: about a minute on 2 cores
def test_two_gloo_ranks_match_one_process(tmp_path, tiny_model):  # noqa: F811
    settings = {"data": str(qa_file(tmp_path / "train.jsonl", n=6)), "scorer": str(tiny_model), "reader": "gold",
                "k": 2, "epochs": 1, "batch_size": 6, "mini_batch_size": 3, "ppo_epochs": 2, "lr": 1e-2,
                "device": "cpu", "max_passage_tokens": 16, "save_every": 1}
    finals = []
    for name, launcher in (("single", [sys.executable, "-m", "rearank"]),
                           ("ddp", [sys.executable, "-m", "torch.distributed.run", "--standalone",
                                    "--nproc_per_node", "2", "-m", "rearank"])):
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump({**settings, "output": str(tmp_path / name)}), encoding="utf-8")
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        done = subprocess.run([*launcher, "rag", "rrpo", "train", "--config", str(path), "--no-progress"], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        finals.append(PointwiseScorer.load(tmp_path / name / "final", device="cpu").model.state_dict())
    start = PointwiseScorer.load(tiny_model, device="cpu").model.state_dict()
    moved = max((finals[0][k] - start[k]).abs().max().item() for k in start)
    # Summing a batch's gradient over two ranks groups the float32 additions otherwise than one process does;
    # after Adam's four updates the parameters differ by about 1e-6 (1.3e-6 measured on 2026-11-26). A rank that
    # trained on its half alone, or a gradient summed and not averaged, moves them by the order of a step (lr 1e-2).
    assert moved > 1e-3  # the steps moved the policy by far more than the tolerance below
    for key, value in finals[0].items():
        assert torch.allclose(value, finals[1][key], rtol=0, atol=1e-5), key


def test_shards_cover_a_batch_in_order():
    shards = [Group(rank, 3).shard(list(range(7))) for rank in range(3)]
    assert shards == [[0, 1, 2], [3, 4], [5, 6]]
    assert Group().gather("x") == ["x"]
