"""The RRPO trainer: a plain PyTorch loop (the policy is a small scorer, not a verl job).

Each optimizer step takes ``batch_size`` questions. For each, the policy samples ``k`` passages in sequence
(Plackett-Luce); the reader answers from the first t picks for t = 1..k, and the step reward is EM + F1 + Hit(+1/-1).
The baseline V(s_t) is the same reward for the *reference* scorer's greedy top-t: the reference is frozen, so its
scores and baseline answers are computed once per question and kept (in the checkpoint too): a second epoch makes
no new baseline reader calls. Advantages come from GAE and are normalised over a sliding window; the loss is
PPO-clip minus beta times the k3 KL to the reference, accumulated over the batch before one AdamW step.

Output folder: ``log.jsonl`` (one line per optimizer step; with ``eval_data``, one more line with the held-out
mean step reward and EM of the greedy top-k before training and after each epoch), ``checkpoint/`` (scorer, optimizer, trainer state;
replaced atomically every ``save_every`` steps) and ``final/`` (the trained scorer, usable as
``--selector pointwise:OUT/final`` and ``rearank rerank --mode pointwise --model OUT/final``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import yaml
from tqdm import tqdm

from rearank.errors import RearankError
from rearank.io.files import atomic_folder
from rearank.methods.pointwise import PointwiseScorer
from rearank.rag.evaluate import score_answer
from rearank.rag.readers import Reader
from rearank.rag.rrpo.objective import (
    WindowNormalizer,
    gae,
    greedy_picks,
    k3_kl,
    pl_log_probs,
    pl_sample,
    rrpo_loss,
    step_reward,
)
from rearank.rag.types import QAItem


@dataclass
class RRPOConfig:
    """Every setting of a run; defaults follow the paper (HotpotQA: k 3, 2 epochs, lr 2e-6, batch 32)."""

    data: str = ""
    fmt: str = "auto"
    limit: int | None = None
    eval_data: str | None = None
    eval_limit: int | None = None
    output: str = "runs/rrpo"
    scorer: str = "embedded"
    kind: str | None = None
    num_layers: int | None = None
    max_passage_tokens: int = 128
    max_candidates: int | None = None
    reader: str = "noisy-oracle"
    reader_model: str | None = None
    reader_template: str = "rrpo"
    reader_options: dict[str, Any] = field(default_factory=dict)
    reader_cache: str | None = None
    k: int = 3
    epochs: int = 2
    batch_size: int = 32
    lr: float = 2e-6
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    clip_eps: float = 0.2
    beta: float = 0.1
    gamma: float = 0.99
    lam: float = 0.95
    gae_literal: bool = False
    norm_window: int = 1024
    ppo_epochs: int = 1
    save_every: int = 10
    seed: int = 0
    device: str | None = None

    @classmethod
    def from_yaml(cls, path: str | os.PathLike, overrides: dict[str, Any] | None = None) -> RRPOConfig:
        """Read a YAML config (keys = field names), then apply ``overrides``; unknown keys are an error."""
        try:
            raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as err:
            raise RearankError(f"cannot read the RRPO config {path}: {err}") from None
        if not isinstance(raw, dict):
            raise RearankError(f"{path}: expected a mapping of settings")
        return cls.from_dict({**raw, **(overrides or {})}, where=str(path))

    @classmethod
    def from_dict(cls, raw: dict[str, Any], where: str = "config") -> RRPOConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(raw) - names)
        if unknown:
            raise RearankError(f"{where}: unknown RRPO settings {unknown}; known: {sorted(names)}")
        config = cls(**raw)
        config.check()
        return config

    def check(self) -> None:
        if not self.data:
            raise RearankError("RRPO config: 'data' (a QA training file) is required")
        for name in ("k", "epochs", "batch_size", "ppo_epochs", "save_every", "norm_window"):
            if getattr(self, name) < 1:
                raise RearankError(f"RRPO config: {name} must be at least 1, got {getattr(self, name)}")
        if self.lr <= 0 or not 0 < self.clip_eps < 1 or self.beta < 0:
            raise RearankError("RRPO config: need lr > 0, 0 < clip_eps < 1, beta >= 0")


@dataclass
class Episode:
    item: QAItem
    picks: list[int]
    logp_old: torch.Tensor
    logp_ref: torch.Tensor
    rewards: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    em: float = 0.0
    advantages: list[float] = field(default_factory=list)


def _docs(item: QAItem) -> list[tuple[str, str]]:
    return [(p.title, p.text) for p in item.passages]


def step_rewards(reader: Reader, items: Sequence[QAItem], picks: Sequence[Sequence[int]]) -> list[tuple[list[float], float]]:
    """For each item, the reward of the reader given its first t picks (t = 1..k), and the EM at t = k; one
    reader batch for all items and steps."""
    pairs = [(item, [item.passages[i] for i in chosen[:t]]) for item, chosen in zip(items, picks)
             for t in range(1, len(chosen) + 1)]
    outputs = iter(reader.read(pairs))
    out = []
    for item, chosen in zip(items, picks):
        rewards, em = [], 0.0
        for _ in chosen:
            s = score_answer(next(outputs), item.answers)
            rewards.append(step_reward(s["em"], s["f1"], s["hit"]))
            em = s["em"]
        out.append((rewards, em))
    return out


def evaluate_policy(scorer: PointwiseScorer, items: Sequence[QAItem], reader: Reader, k: int) -> dict[str, float]:
    """Greedy top-k of ``scorer`` on ``items``: mean step reward (over items and the k steps) and EM at k."""
    with torch.inference_mode():
        picks = [greedy_picks(scorer.scores(item.question, _docs(item)), k) for item in items]
    results = step_rewards(reader, items, picks)
    rewards = [r for rs, _ in results for r in rs]
    return {"mean_step_reward": sum(rewards) / max(len(rewards), 1),
            "em": sum(em for _, em in results) / max(len(results), 1)}


class RRPOTrainer:
    """Train ``policy`` against ``reader``; ``reference`` is a frozen copy of the starting scorer."""

    def __init__(self, config: RRPOConfig, policy: PointwiseScorer, reference: PointwiseScorer, reader: Reader,
                 items: Sequence[QAItem], log: Callable[[dict[str, Any]], None] | None = None,
                 heldout: Sequence[QAItem] = ()) -> None:
        self.config, self.policy, self.reference, self.reader = config, policy, reference, reader
        self.items = list(items)
        self.heldout = list(heldout)
        if not self.items:
            raise RearankError("RRPO: no training questions")
        short = [i.qid for i in self.items if len(i.passages) < config.k]
        if short:
            raise RearankError(f"RRPO: {len(short)} questions have fewer than k={config.k} passages (e.g. {short[0]})")
        self.output = Path(config.output)
        self.optimizer = torch.optim.AdamW(
            [p for p in policy.model.parameters() if p.requires_grad], lr=config.lr, weight_decay=config.weight_decay)
        self.normalizer = WindowNormalizer(config.norm_window)
        self.baseline: dict[str, list[float]] = {}  # qid -> V(s_1..s_k) of the reference's greedy picks
        self._ref_scores: dict[str, torch.Tensor] = {}
        self.step = self.epoch = self.position = 0
        self.baseline_calls = 0
        self.generator = torch.Generator().manual_seed(config.seed)
        self.log = log

    # --- episodes --------------------------------------------------------------------------------------------

    def _reference_scores(self, item: QAItem) -> torch.Tensor:
        if item.qid not in self._ref_scores:
            with torch.inference_mode():
                self._ref_scores[item.qid] = self.reference.scores(item.question, _docs(item)).detach().cpu()
        return self._ref_scores[item.qid]

    def collect(self, batch: Sequence[QAItem]) -> list[Episode]:
        """Sample one episode per question and fill its rewards, baseline values and raw advantages."""
        k = self.config.k
        episodes = []
        for item in batch:
            with torch.no_grad():
                scores = self.policy.scores(item.question, _docs(item)).detach().cpu()
            picks = pl_sample(scores, k, self.generator)
            ref = self._reference_scores(item)
            episodes.append(Episode(item, picks, pl_log_probs(scores, picks), pl_log_probs(ref, picks)))
        for episode, (rewards, em) in zip(episodes, step_rewards(self.reader, batch, [e.picks for e in episodes])):
            episode.rewards, episode.em = rewards, em
        missing = [e.item for e in episodes if e.item.qid not in self.baseline]
        if missing:
            ref_picks = [greedy_picks(self._reference_scores(item), k) for item in missing]
            self.baseline_calls += len(missing) * k
            for item, (values, _) in zip(missing, step_rewards(self.reader, missing, ref_picks)):
                self.baseline[item.qid] = values
        for episode in episodes:
            episode.values = self.baseline[episode.item.qid]
            episode.advantages = gae(episode.rewards, episode.values, self.config.gamma, self.config.lam,
                                     literal=self.config.gae_literal)
        return episodes

    def update(self, episodes: Sequence[Episode]) -> dict[str, float]:
        """Normalise the advantages, then ``ppo_epochs`` passes of accumulated PPO gradients, one AdamW step each."""
        c = self.config
        raw = [a for e in episodes for a in e.advantages]
        flat = self.normalizer(raw)
        offset = 0
        normed = []
        for e in episodes:
            normed.append(torch.tensor(flat[offset:offset + len(e.advantages)], dtype=torch.float32))
            offset += len(e.advantages)
        # the model stays in eval mode: dropout would make pi_theta differ from pi_old at ratio 1
        loss_sum = kl_sum = clipped = 0.0
        for _ in range(c.ppo_epochs):
            self.optimizer.zero_grad(set_to_none=True)
            for e, adv in zip(episodes, normed):
                scores = self.policy.scores(e.item.question, _docs(e.item)).cpu()
                logp = pl_log_probs(scores, e.picks)
                loss = rrpo_loss(logp, e.logp_old, e.logp_ref, adv, c.clip_eps, c.beta) / len(episodes)
                loss.backward()
                with torch.no_grad():
                    loss_sum += float(loss)
                    kl_sum += float(k3_kl(logp, e.logp_ref).mean()) / len(episodes)
                    ratio = torch.exp(logp - e.logp_old)
                    clipped += float(((ratio - 1).abs() > c.clip_eps).float().mean()) / len(episodes)
            torch.nn.utils.clip_grad_norm_(self.policy.model.parameters(), c.max_grad_norm)
            self.optimizer.step()
        n = len(episodes)
        return {"loss": loss_sum / c.ppo_epochs, "kl": kl_sum / c.ppo_epochs, "clip_frac": clipped / c.ppo_epochs,
                "reward": sum(sum(e.rewards) / len(e.rewards) for e in episodes) / n,
                "ref_reward": sum(sum(e.values) / len(e.values) for e in episodes) / n,
                "em": sum(e.em for e in episodes) / n, "advantage": sum(raw) / len(raw)}

    # --- loop, checkpoints ---------------------------------------------------------------------------------

    def order(self, epoch: int) -> list[QAItem]:
        items = list(self.items)
        random.Random(self.config.seed * 1000 + epoch).shuffle(items)
        return items

    def train(self, progress: bool = True) -> None:
        c = self.config
        per_epoch = -(-len(self.items) // c.batch_size)
        bar = tqdm(total=per_epoch * c.epochs, initial=self.step, unit="step", desc="rrpo", disable=not progress,
                   dynamic_ncols=True)
        try:
            if self.step == 0 and self.position == 0 and self.epoch == 0:
                self._evaluate(self.reference, "reference")
            while self.epoch < c.epochs:
                items = self.order(self.epoch)
                while self.position < len(items):
                    batch = items[self.position:self.position + c.batch_size]
                    figures = self.update(self.collect(batch))
                    self.position += len(batch)
                    self.step += 1
                    record = {"step": self.step, "epoch": self.epoch, **figures,
                              "reader_calls": getattr(self.reader, "generated", None),
                              "baseline_calls": self.baseline_calls}
                    self._append_log(record)
                    bar.update(1)
                    bar.set_postfix(reward=f"{figures['reward']:.3f}", ref=f"{figures['ref_reward']:.3f}",
                                    kl=f"{figures['kl']:.4f}", refresh=False)
                    if self.step % c.save_every == 0:
                        self.save_checkpoint()
                self.epoch += 1
                self.position = 0
                self._evaluate(self.policy, f"epoch {self.epoch}")
                self.save_checkpoint()
        finally:
            bar.close()
        self.policy.save(self.output / "final")

    def _evaluate(self, scorer: PointwiseScorer, label: str) -> None:
        """Log the held-out figures of ``scorer`` (greedy top-k) when ``eval_data`` is set."""
        if self.heldout:
            figures = evaluate_policy(scorer, self.heldout, self.reader, self.config.k)
            self._append_log({"step": self.step, "heldout": label, **{f"heldout_{k}": v for k, v in figures.items()}})

    def _append_log(self, record: dict[str, Any]) -> None:
        self.output.mkdir(parents=True, exist_ok=True)
        with open(self.output / "log.jsonl", "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
        if self.log is not None:
            self.log(record)

    def state(self) -> dict[str, Any]:
        return {"step": self.step, "epoch": self.epoch, "position": self.position, "baseline": self.baseline,
                "baseline_calls": self.baseline_calls, "normalizer": self.normalizer.state(),
                "config": dataclasses.asdict(self.config)}

    def save_checkpoint(self) -> None:
        """Write ``checkpoint/`` (scorer, optimizer, generator, state) under a temporary name, then swap it in."""
        with atomic_folder(self.output / "checkpoint", replace=True) as tmp:
            self.policy.save(tmp / "scorer")
            torch.save({"optimizer": self.optimizer.state_dict(), "generator": self.generator.get_state()},
                       tmp / "optimizer.pt")
            (tmp / "state.json").write_text(json.dumps(self.state()) + "\n", encoding="utf-8")

    def load_checkpoint(self) -> None:
        """Restore optimizer, counters, baseline cache and normaliser from ``checkpoint/`` (the policy weights are
        loaded by :func:`build_trainer`)."""
        folder = self.output / "checkpoint"
        state = json.loads((folder / "state.json").read_text(encoding="utf-8"))
        saved = torch.load(folder / "optimizer.pt", weights_only=False)
        self.optimizer.load_state_dict(saved["optimizer"])
        self.generator.set_state(saved["generator"])
        self.step, self.epoch, self.position = state["step"], state["epoch"], state["position"]
        self.baseline = {q: list(v) for q, v in state["baseline"].items()}
        self.baseline_calls = state["baseline_calls"]
        self.normalizer.load(state["normalizer"])
        if self.output.joinpath("log.jsonl").is_file():  # drop log lines written after the checkpoint
            lines = self.output.joinpath("log.jsonl").read_text(encoding="utf-8").splitlines()
            kept = [ln for ln in lines if ln.strip() and json.loads(ln)["step"] <= self.step]
            self.output.joinpath("log.jsonl").write_text("".join(ln + "\n" for ln in kept), encoding="utf-8")


def load_items(path: str, fmt: str, limit: int | None, max_candidates: int | None) -> list[QAItem]:
    from rearank.io.qa import load_qa

    items = load_qa(path, fmt, limit)
    if max_candidates is not None:
        items = [dataclasses.replace(i, passages=i.passages[:max_candidates]) for i in items]
    return items


def build_trainer(config: RRPOConfig, reader: Reader, resume: bool = False,
                  log: Callable[[dict[str, Any]], None] | None = None) -> RRPOTrainer:
    """Load data, policy, reference and (on ``resume``) the checkpoint; refuse to overwrite a run otherwise."""
    output = Path(config.output)
    checkpoint = output / "checkpoint"
    if resume and not (checkpoint / "state.json").is_file():
        raise RearankError(f"--resume: no checkpoint in {output}; start without --resume")
    if not resume and (checkpoint.exists() or (output / "log.jsonl").exists()):
        raise RearankError(f"{output} already holds an RRPO run; pass --resume or choose another output")
    if resume:
        saved = json.loads((checkpoint / "state.json").read_text(encoding="utf-8"))["config"]
        changed = sorted(k for k in saved if k not in ("epochs", "save_every") and saved[k] != getattr(config, k))
        if changed:
            raise RearankError(f"--resume: settings differ from the checkpoint's ({', '.join(changed)})")
    torch.manual_seed(config.seed)
    items = load_items(config.data, config.fmt, config.limit, config.max_candidates)
    options = {"kind": config.kind, "device": config.device, "max_passage_tokens": config.max_passage_tokens}
    reference = PointwiseScorer.load(config.scorer, num_layers=config.num_layers, **options)
    for p in reference.model.parameters():
        p.requires_grad_(False)
    start = checkpoint / "scorer" if resume else config.scorer
    policy = PointwiseScorer.load(start, num_layers=None if resume else config.num_layers, **options)
    heldout = load_items(config.eval_data, config.fmt, config.eval_limit, config.max_candidates) if config.eval_data else []
    trainer = RRPOTrainer(config, policy, reference, reader, items, log=log, heldout=heldout)
    if resume:
        trainer.load_checkpoint()
    return trainer
