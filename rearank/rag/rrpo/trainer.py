"""The RRPO trainer: Algorithm 1 of the paper as a plain PyTorch loop (the policy is a small scorer, not a verl job).

Each iteration takes ``batch_size`` questions (the paper's 32). For each, the policy samples ``k`` passages in
sequence (Plackett-Luce; the draw is seeded by the run's seed, the epoch and the question, so it does not depend on
how questions are spread over ranks); the reader answers from the first t picks for t = 1..k, and the step reward
is EM + F1 + Hit(+1/-1). The baseline V(s_t) is the same reward for the *reference* scorer's greedy top-t: the
reference is frozen, so its scores and baseline answers are computed once per question and kept (in the checkpoint
too): a second epoch makes no new baseline reader calls. Advantages come from GAE and are normalised over a sliding
window. The update then runs ``ppo_epochs`` passes (E_ppo) over the iteration's episodes in shuffled mini-batches
of ``mini_batch_size`` episodes (gradients accumulated episode by episode, one AdamW step a mini-batch); the loss is
PPO-clip against the rollout policy pi_old minus beta times the k3 KL to the reference, so from the second
mini-batch on the ratio moves away from 1 and the clip acts. Under ``torchrun`` the episodes of an iteration are
spread over the ranks (:mod:`rearank.rag.rrpo.distributed`).

Output folder: ``log.jsonl`` (one line per optimizer step; with ``eval_data``, one more line with the held-out
mean step reward and EM of the greedy top-k before training and after each epoch), ``checkpoint/`` (scorer, optimizer, trainer state;
replaced atomically every ``save_every`` steps) and ``final/`` (the trained scorer, usable as
``--selector pointwise:OUT/final`` and ``rearank rerank --method pointwise --model OUT/final``).
"""

from __future__ import annotations

import dataclasses
import hashlib
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

from rearank.backends.scorer import PointwiseScorer
from rearank.errors import RearankError
from rearank.io.files import atomic_folder
from rearank.rag.evaluate import score_answer
from rearank.rag.readers import Reader
from rearank.rag.rrpo.distributed import Group
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
from rearank.types import QAItem


@dataclass
class RRPOConfig:
    """Every setting of a run; defaults follow the paper (HotpotQA: k 3, 2 epochs, lr 2e-6, batch 32). Ours, where
    the paper gives no value: ``weight_decay`` 0.01 (AdamW's usual), ``max_grad_norm`` 1.0, ``norm_window`` 1024
    advantages, ``ppo_epochs`` 4 (PPO's common E_ppo), ``mini_batch_size`` = ``batch_size`` (one AdamW step per
    pass, each over the 32 episodes the paper accumulates)."""

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
    corpus: str | None = None
    depth: int = 100
    reader: str = "noisy-gold"
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
    ppo_epochs: int = 4
    mini_batch_size: int | None = None
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
        if self.mini_batch_size is not None and self.mini_batch_size < 1:
            raise RearankError(f"RRPO config: mini_batch_size must be at least 1, got {self.mini_batch_size}")
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


def _episode_seed(seed: int, epoch: int, qid: str) -> int:
    digest = hashlib.sha256(f"{seed}\x1f{epoch}\x1f{qid}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


class RRPOTrainer:
    """Train ``policy`` against ``reader``; ``reference`` is a frozen copy of the starting scorer. ``group``: this
    process's rank among data-parallel ranks (default: a single process)."""

    def __init__(self, config: RRPOConfig, policy: PointwiseScorer, reference: PointwiseScorer, reader: Reader,
                 items: Sequence[QAItem], log: Callable[[dict[str, Any]], None] | None = None,
                 heldout: Sequence[QAItem] = (), group: Group | None = None) -> None:
        self.config, self.policy, self.reference, self.reader = config, policy, reference, reader
        self.group = group or Group()
        self.items = list(items)
        self.heldout = list(heldout)
        if not self.items:
            raise RearankError("RRPO: no training questions")
        short = [i.qid for i in self.items if len(i.passages) < config.k]
        if short:
            raise RearankError(f"RRPO: {len(short)} questions have fewer than k={config.k} passages (e.g. {short[0]})")
        self.output = Path(config.output)
        self.parameters = [p for p in policy.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(self.parameters, lr=config.lr, weight_decay=config.weight_decay)
        self.normalizer = WindowNormalizer(config.norm_window)
        self.baseline: dict[str, list[float]] = {}  # qid -> V(s_1..s_k) of the reference's greedy picks
        self._ref_scores: dict[str, torch.Tensor] = {}
        self.step = self.epoch = self.position = 0
        self.baseline_calls = 0  # this rank's
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
            generator = torch.Generator().manual_seed(_episode_seed(self.config.seed, self.epoch, item.qid))
            picks = pl_sample(scores, k, generator)
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

    def update(self, episodes: Sequence[Episode], total: int | None = None, offset: int = 0) -> dict[str, float]:
        """Normalise the advantages, then ``ppo_epochs`` passes over shuffled mini-batches, one AdamW step each.

        ``episodes`` are this rank's: the iteration's episodes ``offset .. offset + len(episodes)`` of ``total``
        (default: all of them). Returns the iteration's figures over all ranks.
        """
        c, group = self.config, self.group
        total = len(episodes) if total is None else total
        raw = [a for e in episodes for a in e.advantages]
        everyone = [a for part in group.gather(raw) for a in part]
        flat = self.normalizer(raw, everyone)
        normed, at = [], 0
        for e in episodes:
            normed.append(torch.tensor(flat[at:at + len(e.advantages)], dtype=torch.float32))
            at += len(e.advantages)
        size = c.mini_batch_size or c.batch_size
        # the model stays in eval mode: dropout would make pi_theta differ from pi_old at ratio 1
        loss_sum = clipped = 0.0
        updates = 0
        for ppo_epoch in range(c.ppo_epochs):
            order = torch.randperm(total, generator=torch.Generator().manual_seed(
                _episode_seed(c.seed, self.step * c.ppo_epochs + ppo_epoch, "minibatches"))).tolist()
            for start in range(0, total, size):
                chosen = order[start:start + size]
                self.optimizer.zero_grad(set_to_none=True)
                for g in chosen:
                    if not offset <= g < offset + len(episodes):
                        continue  # another rank's episode
                    e, adv = episodes[g - offset], normed[g - offset]
                    scores = self.policy.scores(e.item.question, _docs(e.item)).cpu()
                    logp = pl_log_probs(scores, e.picks)
                    loss = rrpo_loss(logp, e.logp_old, e.logp_ref, adv, c.clip_eps, c.beta) / len(chosen)
                    loss.backward()
                    with torch.no_grad():
                        loss_sum += float(loss)
                        ratio = torch.exp(logp - e.logp_old)
                        clipped += float(((ratio - 1).abs() > c.clip_eps).float().mean())
                group.sum_gradients(self.parameters)
                torch.nn.utils.clip_grad_norm_(self.parameters, c.max_grad_norm)
                self.optimizer.step()
                updates += 1
        with torch.no_grad():  # KL of the rollout policy to the reference (what the first mini-batch saw)
            kl_sum = sum(float(k3_kl(e.logp_old, e.logp_ref).mean()) for e in episodes)
        sums = group.gather({"loss": loss_sum, "kl": kl_sum, "clipped": clipped, "calls": self.baseline_calls,
                             "reward": sum(sum(e.rewards) / len(e.rewards) for e in episodes),
                             "ref_reward": sum(sum(e.values) / len(e.values) for e in episodes),
                             "em": sum(e.em for e in episodes), "advantage": sum(raw), "steps": len(raw)})
        total_of = {key: sum(part[key] for part in sums) for key in sums[0]}
        passes = c.ppo_epochs * total
        return {"loss": total_of["loss"] / max(updates, 1), "kl": total_of["kl"] / total,
                "clip_frac": total_of["clipped"] / passes, "reward": total_of["reward"] / total,
                "ref_reward": total_of["ref_reward"] / total, "em": total_of["em"] / total,
                "advantage": total_of["advantage"] / total_of["steps"], "baseline_calls": total_of["calls"],
                "updates": updates}

    # --- loop, checkpoints ---------------------------------------------------------------------------------

    def order(self, epoch: int) -> list[QAItem]:
        items = list(self.items)
        random.Random(self.config.seed * 1000 + epoch).shuffle(items)
        return items

    def train(self, progress: bool = True) -> None:
        c, group = self.config, self.group
        per_epoch = -(-len(self.items) // c.batch_size)
        bar = tqdm(total=per_epoch * c.epochs, initial=self.step, unit="step", desc="rrpo",
                   disable=not progress or not group.main, dynamic_ncols=True)
        try:
            if self.step == 0 and self.position == 0 and self.epoch == 0:
                self._evaluate(self.reference, "reference")
            while self.epoch < c.epochs:
                items = self.order(self.epoch)
                while self.position < len(items):
                    batch = items[self.position:self.position + c.batch_size]
                    start, _ = group.bounds(len(batch))
                    figures = self.update(self.collect(group.shard(batch)), len(batch), start)
                    self.position += len(batch)
                    self.step += 1
                    record = {"step": self.step, "epoch": self.epoch, **figures,
                              "reader_calls": self._reader_calls()}
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
        if group.main:
            self.policy.save(self.output / "final")
        group.barrier()

    def _reader_calls(self) -> int | None:
        calls = self.group.gather(getattr(self.reader, "generated", None))
        return None if any(n is None for n in calls) else sum(calls)

    def _evaluate(self, scorer: PointwiseScorer, label: str) -> None:
        """Log the held-out figures of ``scorer`` (greedy top-k) when ``eval_data`` is set (on the first rank)."""
        if self.heldout and self.group.main:
            figures = evaluate_policy(scorer, self.heldout, self.reader, self.config.k)
            self._append_log({"step": self.step, "heldout": label, **{f"heldout_{k}": v for k, v in figures.items()}})
        self.group.barrier()

    def _append_log(self, record: dict[str, Any]) -> None:
        if not self.group.main:
            return
        self.output.mkdir(parents=True, exist_ok=True)
        with open(self.output / "log.jsonl", "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
        if self.log is not None:
            self.log(record)

    def state(self) -> dict[str, Any]:
        """The counters, every rank's baseline values and the normaliser (the same on every rank)."""
        baseline: dict[str, list[float]] = {}
        for part in self.group.gather(self.baseline):
            baseline.update(part)
        return {"step": self.step, "epoch": self.epoch, "position": self.position, "baseline": baseline,
                "baseline_calls": sum(self.group.gather(self.baseline_calls)), "normalizer": self.normalizer.state(),
                "config": dataclasses.asdict(self.config)}

    def save_checkpoint(self) -> None:
        """Write ``checkpoint/`` (scorer, optimizer, state) under a temporary name, then swap it in (first rank)."""
        state = self.state()
        if self.group.main:
            with atomic_folder(self.output / "checkpoint", replace=True) as tmp:
                self.policy.save(tmp / "scorer")
                torch.save({"optimizer": self.optimizer.state_dict()}, tmp / "optimizer.pt")
                (tmp / "state.json").write_text(json.dumps(state) + "\n", encoding="utf-8")
        self.group.barrier()

    def load_checkpoint(self) -> None:
        """Restore optimizer, counters, baseline cache and normaliser from ``checkpoint/`` (the policy weights are
        loaded by :func:`build_trainer`)."""
        folder = self.output / "checkpoint"
        state = json.loads((folder / "state.json").read_text(encoding="utf-8"))
        saved = torch.load(folder / "optimizer.pt", weights_only=False)
        self.optimizer.load_state_dict(saved["optimizer"])
        self.step, self.epoch, self.position = state["step"], state["epoch"], state["position"]
        self.baseline = {q: list(v) for q, v in state["baseline"].items()}
        self.baseline_calls = state["baseline_calls"] if self.group.main else 0
        self.normalizer.load(state["normalizer"])
        if self.group.main and self.output.joinpath("log.jsonl").is_file():  # drop lines written after it
            lines = self.output.joinpath("log.jsonl").read_text(encoding="utf-8").splitlines()
            kept = [ln for ln in lines if ln.strip() and json.loads(ln)["step"] <= self.step]
            self.output.joinpath("log.jsonl").write_text("".join(ln + "\n" for ln in kept), encoding="utf-8")
        self.group.barrier()


def load_items(path: str, fmt: str, limit: int | None, max_candidates: int | None) -> list[QAItem]:
    from rearank.io.qa import load_qa

    items = load_qa(path, fmt, limit)
    if max_candidates is not None:
        items = [dataclasses.replace(i, passages=i.passages[:max_candidates]) for i in items]
    return items


def build_trainer(config: RRPOConfig, reader: Reader, resume: bool = False,
                  log: Callable[[dict[str, Any]], None] | None = None, group: Group | None = None) -> RRPOTrainer:
    """Load data, policy, reference and (on ``resume``) the checkpoint; refuse to overwrite a run otherwise.

    ``group``: the data-parallel ranks (default: from ``torchrun``'s environment, else a single process); on GPUs
    each rank uses ``cuda:LOCAL_RANK``.
    """
    group = group or Group.from_env(config.device)
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
    heldout = load_items(config.eval_data, config.fmt, config.eval_limit, config.max_candidates) if config.eval_data else []
    if config.corpus:  # open retrieval: the BM25 top ``depth`` of a corpus (rearank.rag.retrieval), as rag eval does
        from rearank.rag.retrieval import Corpus, retrieve

        corpus = Corpus(config.corpus, progress=False)
        items = retrieve(items, corpus, config.depth)[0]
        heldout = retrieve(heldout, corpus, config.depth)[0] if heldout else []
    device = config.device
    if group.world > 1 and device == "cuda":
        device = f"cuda:{os.environ.get('LOCAL_RANK', group.rank)}"
    options = {"kind": config.kind, "device": device, "max_passage_tokens": config.max_passage_tokens}
    reference = PointwiseScorer.load(config.scorer, num_layers=config.num_layers, **options)
    for p in reference.model.parameters():
        p.requires_grad_(False)
    start = checkpoint / "scorer" if resume else config.scorer
    policy = PointwiseScorer.load(start, num_layers=None if resume else config.num_layers, **options)
    trainer = RRPOTrainer(config, policy, reference, reader, items, log=log, heldout=heldout, group=group)
    if resume:
        trainer.load_checkpoint()
    group.barrier()  # no rank writes before every rank has checked the output folder
    return trainer
