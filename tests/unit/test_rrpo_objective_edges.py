"""RRPO formula edges found by mutation testing: both sides of the clip, the loss's defaults, seeded sampling,
the normaliser's window and eps."""

from __future__ import annotations

import math

import pytest
import torch

from rearank.rag.rrpo.objective import WindowNormalizer, clipped_surrogate, gae, pl_log_probs, pl_sample, rrpo_loss


def surrogate(ratio: float, advantage: float, eps: float = 0.2) -> float:
    logp_old = torch.tensor([math.log(0.2)], dtype=torch.float64)
    logp = logp_old + math.log(ratio)
    return clipped_surrogate(logp, logp_old, torch.tensor([advantage], dtype=torch.float64), eps).item()


@pytest.mark.parametrize(("ratio", "advantage", "expected"), [
    (1.5, 2.0, 2.4),    # min(3, 1.2 * 2): clipped above
    (0.5, 2.0, 1.0),    # min(1, 0.8 * 2): the unclipped term is smaller
    (0.5, -2.0, -1.6),  # min(-1, 0.8 * -2): clipped below
    (1.1, 2.0, 2.2),    # inside the clip range: rho * A
    (1.5, -2.0, -3.0),  # min(-3, 1.2 * -2)
])
def test_clipped_surrogate_both_sides(ratio, advantage, expected):
    assert surrogate(ratio, advantage) == pytest.approx(expected)


def test_rrpo_loss_defaults_and_options():
    # rho = 0.3 / 0.2 = 1.5, A = 2 -> surrogate 2.4 (eps 0.2); r = 0.6 / 0.3 = 2 -> k3 = 2 - ln 2 - 1
    logp, logp_old, logp_ref = (torch.tensor([math.log(p)], dtype=torch.float64) for p in (0.3, 0.2, 0.6))
    advantages = torch.tensor([2.0], dtype=torch.float64)
    kl = 2 - math.log(2) - 1
    assert rrpo_loss(logp, logp_old, logp_ref, advantages).item() == pytest.approx(-(2.4 - 0.1 * kl))
    assert rrpo_loss(logp, logp_old, logp_ref, advantages, eps=0.1, beta=0.5).item() == pytest.approx(-(2.2 - 0.5 * kl))


def test_gae_names_the_lengths_that_differ():
    with pytest.raises(ValueError, match="3 rewards but 2 values"):
        gae([1.0, 0.0, 1.0], [0.5, 0.5])


def test_no_picks_no_log_probs():
    assert pl_log_probs(torch.tensor([1.0, 2.0]), []).shape == (0,)


def test_pl_sample_follows_its_generator():
    scores = torch.zeros(20)
    draws = [pl_sample(scores, 5, torch.Generator().manual_seed(7)) for _ in range(2)]
    assert draws[0] == draws[1]
    assert pl_sample(scores, 5, torch.Generator().manual_seed(8)) != draws[0]


def test_window_normalizer_reads_the_whole_batch_it_is_given():
    # the window takes in seen = [0, 2] (mean 1, std 1), not the rank's own advantage
    assert WindowNormalizer()([2.0], seen=[0.0, 2.0]) == pytest.approx([1.0])


def test_window_normalizer_eps_keeps_near_equal_advantages_bounded():
    # std 5e-9: (+-5e-9) / (5e-9 + 1e-8) = +-1/3
    assert WindowNormalizer()([0.0, 1e-8]) == pytest.approx([-1 / 3, 1 / 3])


def test_window_normalizer_keeps_1024_advantages():
    # docs/rag.md: a window of 1,024 advantages (the paper gives no length)
    normalizer = WindowNormalizer()
    normalizer([100.0] + [0.0] * 1023)
    normalizer([0.0])  # the 100 leaves the window: all zeros, normalised to 0
    assert normalizer.state()["window"] == 1024 and max(normalizer.state()["values"]) == 0.0
