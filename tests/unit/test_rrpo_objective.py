"""RRPO formulas against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from rearank.rag.rrpo.objective import (
    WindowNormalizer,
    clipped_surrogate,
    gae,
    greedy_picks,
    k3_kl,
    pl_log_probs,
    pl_sample,
    rrpo_loss,
    step_reward,
)

SCORES = torch.tensor([2.0, 1.0, 0.0])
# softmax([2, 1, 0]): e^2 = 7.389056, e^1 = 2.718282, e^0 = 1; sum 11.107338
P = (0.665241, 0.244728, 0.090031)


def test_plackett_luce_probabilities():
    logp = pl_log_probs(SCORES, [0, 1, 2])
    # pick 0: p0 = 0.665241; pick 1: p1 / (1 - p0) = 0.244728 / 0.334759 = 0.731059; pick 2: 1
    assert torch.exp(logp).tolist() == pytest.approx([0.665241, 0.731059, 1.0], abs=1e-6)
    # order 2, 0: p2 = 0.090031, then p0 / (1 - p2) = 0.665241 / 0.909969 = 0.731059
    assert torch.exp(pl_log_probs(SCORES, [2, 0])).tolist() == pytest.approx([0.090031, 0.731059], abs=1e-6)


def test_plackett_luce_sampling_law():
    gen = torch.Generator().manual_seed(0)
    draws = 20000
    firsts = [pl_sample(SCORES, 2, gen)[0] for _ in range(draws)]
    freqs = [firsts.count(i) / draws for i in range(3)]
    # binomial standard error <= sqrt(0.25 / 20000) = 0.0035; allow ~4 of them
    assert freqs == pytest.approx(list(P), abs=0.015)
    assert all(len(set(pl_sample(SCORES, 3, gen))) == 3 for _ in range(50))


def test_greedy_picks_ties_keep_order():
    assert greedy_picks(torch.tensor([1.0, 3.0, 3.0, 0.0]), 3) == [1, 2, 0]


def test_step_reward_range():
    assert step_reward(1.0, 1.0, 1.0) == 3.0
    assert step_reward(0.0, 0.0, 0.0) == -1.0
    assert step_reward(0.0, 1 / 3, 1.0) == pytest.approx(4 / 3)


def test_gae_hand_computed():
    r, v = [1.0, 3.0, 2.0], [-1.0, 1.0, 3.0]
    # deltas: 1 + .99*1 - (-1) = 2.99; 3 + .99*3 - 1 = 4.97; 2 + 0 - 3 = -1   (gamma*lambda = 0.9405)
    # A3 = -1; A2 = 4.97 - 0.9405 = 4.0295; A1 = 2.99 + 0.9405 * 4.0295 = 6.77974475
    assert gae(r, v) == pytest.approx([6.77974475, 4.0295, -1.0])
    # the paper's literal sum stops at k-1: A3 = 0; A2 = 4.97; A1 = 2.99 + 0.9405 * 4.97 = 7.664285
    assert gae(r, v, literal=True) == pytest.approx([7.664285, 4.97, 0.0])
    with pytest.raises(ValueError):
        gae([1.0], [1.0, 2.0])


def test_k3_kl():
    # pi_ref = 0.5, pi = 0.25: r = 2, 2 - ln 2 - 1 = 0.306853
    kl = k3_kl(torch.log(torch.tensor([0.25, 0.4])), torch.log(torch.tensor([0.5, 0.4])))
    assert kl.tolist() == pytest.approx([2 - math.log(2) - 1, 0.0], abs=1e-6)


def test_clipped_objective_at_ratio_1_5():
    logp_old = torch.log(torch.tensor([0.2, 0.2]))
    logp = torch.log(torch.tensor([0.3, 0.3]))  # ratio 1.5
    adv = torch.tensor([1.0, -1.0])
    # A = +1: min(1.5, 1.2) = 1.2; A = -1: min(-1.5, -1.2) = -1.5
    assert clipped_surrogate(logp, logp_old, adv, 0.2).tolist() == pytest.approx([1.2, -1.5])
    # loss with beta = 0.1 and pi_ref = pi_old = 0.2: k3 = 2/3 - ln(2/3) - 1 = 0.0721318 per step
    kl = 2 / 3 - math.log(2 / 3) - 1
    expected = -((1.2 - 0.1 * kl) + (-1.5 - 0.1 * kl)) / 2
    assert float(rrpo_loss(logp, logp_old, logp_old, adv, 0.2, 0.1)) == pytest.approx(expected, abs=1e-6)


def test_clipped_gradient_vanishes_outside_the_clip():
    logp = torch.log(torch.tensor([0.3])).requires_grad_()
    clipped_surrogate(logp, torch.log(torch.tensor([0.2])), torch.tensor([1.0])).sum().backward()
    assert logp.grad.tolist() == [0.0]  # ratio 1.5 > 1.2 with A > 0: the clipped branch has no gradient


def test_window_normalizer():
    norm = WindowNormalizer(window=3)
    # window [1, 2, 3]: mean 2, population std sqrt(2/3) = 0.816497
    assert norm([1.0, 2.0, 3.0]) == pytest.approx([-1.224745, 0.0, 1.224745], abs=1e-6)
    # window keeps the last 3: [2, 3, 4] -> mean 3, std 0.816497; (4 - 3) / 0.816497 = 1.224745
    assert norm([4.0]) == pytest.approx([1.224745], abs=1e-6)
    restored = WindowNormalizer()
    restored.load(norm.state())
    assert list(restored.values) == [2.0, 3.0, 4.0] and restored.values.maxlen == 3
    assert WindowNormalizer()([5.0]) == [0.0]  # a single value: std 0, eps keeps it finite
