"""RRPO's formulas: Plackett-Luce episodes, the step reward, GAE with a reference-anchored baseline, windowed
advantage normalisation, and the PPO-clip objective with a k3 KL penalty toward the reference scorer."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

import torch


def pl_log_probs(scores: torch.Tensor, picks: Sequence[int]) -> torch.Tensor:
    """log pi(d_t | s_t) for each pick: p = softmax(scores), pi(d | s_t) = p_d / (1 - sum of p already picked).

    Computed as a log-softmax over the passages not yet picked (the same quantity, numerically stable).
    """
    taken = torch.zeros_like(scores, dtype=torch.bool)
    out = []
    for d in picks:
        out.append(torch.log_softmax(scores.masked_fill(taken, float("-inf")), dim=0)[d])
        taken = taken.clone()
        taken[d] = True
    return torch.stack(out) if out else scores.new_zeros(0)


def pl_sample(scores: torch.Tensor, k: int, generator: torch.Generator | None = None) -> list[int]:
    """Draw ``k`` passages without replacement by Plackett-Luce on softmax(scores) (Gumbel top-k, same law)."""
    uniform = torch.rand(scores.shape, generator=generator, dtype=torch.float64).clamp_(1e-12, 1 - 1e-12)
    gumbel = -torch.log(-torch.log(uniform))
    return torch.topk(scores.detach().double().cpu() + gumbel, min(k, scores.numel())).indices.tolist()


def greedy_picks(scores: torch.Tensor, k: int) -> list[int]:
    """The top-``k`` passages by score (ties: the earlier passage first)."""
    order = sorted(range(scores.numel()), key=lambda i: -float(scores[i]))
    return order[:k]


def step_reward(em: float, f1: float, hit: float) -> float:
    """R_lm = EM + F1 + (+1 if a gold answer occurs in the response else -1); in [-1, 3]."""
    return em + f1 + (1.0 if hit else -1.0)


def gae(rewards: Sequence[float], values: Sequence[float], gamma: float = 0.99, lam: float = 0.95,
        literal: bool = False) -> list[float]:
    """Advantages A_t = sum_l (gamma lam)^l delta_{t+l}, delta_t = r_t + gamma V(s_{t+1}) - V(s_t), V(s_{k+1}) = 0.

    ``literal``: the paper's printed sum, whose upper index is k-1, so the last step's delta never enters
    (and A_k = 0).
    """
    k = len(rewards)
    if len(values) != k:
        raise ValueError(f"{k} rewards but {len(values)} values")
    nxt = [*values[1:], 0.0]
    deltas = [rewards[t] + gamma * nxt[t] - values[t] for t in range(k)]
    last = k - 1 if literal else k
    out, running = [0.0] * k, 0.0
    for t in range(last - 1, -1, -1):
        running = deltas[t] + gamma * lam * running
        out[t] = running
    return out


class WindowNormalizer:
    """Normalise advantages by the mean and std of the last ``window`` advantages seen (the new ones included).

    The window's length is ours: the paper (Eq. 14) uses "a sliding window of recent episodes" without a length.
    """

    def __init__(self, window: int = 1024, eps: float = 1e-8) -> None:
        self.values: deque[float] = deque(maxlen=window)
        self.eps = eps

    def __call__(self, advantages: Sequence[float], seen: Sequence[float] | None = None) -> list[float]:
        """``advantages`` normalised after the window takes in ``seen`` (default: ``advantages``; data parallel
        ranks pass the whole batch's, so every rank's window is the single-process one)."""
        self.values.extend(advantages if seen is None else seen)
        mean = sum(self.values) / len(self.values)
        std = (sum((v - mean) ** 2 for v in self.values) / len(self.values)) ** 0.5
        return [(a - mean) / (std + self.eps) for a in advantages]

    def state(self) -> dict[str, Any]:
        return {"window": self.values.maxlen, "values": list(self.values)}

    def load(self, state: dict[str, Any]) -> None:
        self.values = deque(state["values"], maxlen=state["window"])


def k3_kl(logp: torch.Tensor, logp_ref: torch.Tensor) -> torch.Tensor:
    """k3 estimate of KL(pi_theta || pi_ref) per step: r - log r - 1 with r = pi_ref / pi_theta (>= 0)."""
    log_ratio = logp_ref - logp
    return torch.exp(log_ratio) - log_ratio - 1


def clipped_surrogate(logp: torch.Tensor, logp_old: torch.Tensor, advantages: torch.Tensor,
                      eps: float = 0.2) -> torch.Tensor:
    """PPO's min(rho A, clip(rho, 1 - eps, 1 + eps) A) per step, rho = pi_theta / pi_old.

    Eq. 8 of the paper writes the ratio's denominator as pi_ref; Algorithm 1 stores log pi_old with each step and
    runs E_ppo epochs over mini-batches, which is PPO's ratio to the rollout policy. We read pi_ref in Eq. 8 as
    pi_old (a ratio to the fixed reference would clip every update once the policy moves away from it, and the KL
    term already ties the policy to pi_ref)."""
    ratio = torch.exp(logp - logp_old)
    return torch.minimum(ratio * advantages, torch.clamp(ratio, 1 - eps, 1 + eps) * advantages)


def rrpo_loss(logp: torch.Tensor, logp_old: torch.Tensor, logp_ref: torch.Tensor, advantages: torch.Tensor,
              eps: float = 0.2, beta: float = 0.1) -> torch.Tensor:
    """Loss of one episode: -(mean over the k steps of surrogate - beta * k3 KL)."""
    return -(clipped_surrogate(logp, logp_old, advantages, eps) - beta * k3_kl(logp, logp_ref)).mean()
