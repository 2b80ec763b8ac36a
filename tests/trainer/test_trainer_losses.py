"""PPO-clip, KL estimators, logprobs and loss aggregation against hand-computed numbers."""

from __future__ import annotations

import math

import pytest
import torch

from rewardhub_trainer.losses import LossNorm, aggregate, clipped_surrogate, kl_estimate, token_logprobs


def test_token_logprobs_with_temperature() -> None:
    logits = torch.tensor([[[0.0, math.log(3.0)]]])  # softmax = [1/4, 3/4]
    tokens = torch.tensor([[1]])
    assert token_logprobs(logits, tokens).item() == pytest.approx(math.log(0.75))
    # T = 2: z/2 = [0, ln3/2] → p = √3 / (1 + √3)
    assert token_logprobs(logits, tokens, 2.0).item() == pytest.approx(
        math.log(math.sqrt(3) / (1 + math.sqrt(3)))
    )


def test_kl_estimators() -> None:
    logp, ref = torch.tensor([math.log(0.5)]), torch.tensor([math.log(0.25)])  # Δ = ln 2
    d = math.log(2)
    assert kl_estimate(logp, ref, "k1").item() == pytest.approx(d)
    assert kl_estimate(logp, ref, "k2").item() == pytest.approx(0.5 * d * d)
    assert kl_estimate(logp, ref, "k3").item() == pytest.approx(0.5 + d - 1)  # e^{−Δ} + Δ − 1
    assert kl_estimate(ref, ref, "k3").item() == 0.0
    with pytest.raises(ValueError):
        kl_estimate(logp, ref, "k4")


def test_k3_is_nonnegative_and_clamped() -> None:
    delta = torch.linspace(-50, 50, 101)
    k3 = kl_estimate(delta, torch.zeros_like(delta), "k3")
    assert (k3 >= 0).all() and torch.isfinite(k3).all()


def test_k3_value_is_clamped_at_10_as_in_verl() -> None:
    # verl's low_var_kl clamps Δ to ±20 *and* the estimate to [−10, 10] (algorithms.md §4.7): a token the
    # policy made far less likely than the reference (Δ = −15) would otherwise put e^15 − 16 ≈ 3.3e6 in
    # the loss and a gradient of the same size on that one token.
    logp = torch.tensor([-15.0, -2.0, 3.0], requires_grad=True)
    k3 = kl_estimate(logp, torch.zeros(3), "k3")
    assert k3.tolist() == pytest.approx([10.0, math.exp(2.0) - 3.0, math.exp(-3.0) + 2.0])
    k3.sum().backward()
    assert logp.grad is not None
    # d k3 / dΔ = 1 − e^{−Δ}, and 0 where the clamp is active
    assert logp.grad.tolist() == pytest.approx([0.0, 1 - math.exp(2.0), 1 - math.exp(-3.0)])


def test_clipped_surrogate_cases() -> None:
    # ratios 1.5, 0.5, 1.5, 0.5, 1.25 with advantages +1, +1, −1, −1, +1; ε_low = 0.2, ε_high = 0.28
    ratio = torch.tensor([[1.5], [0.5], [1.5], [0.5], [1.25]])
    logp = ratio.log().requires_grad_(True)
    old = torch.zeros_like(logp)
    adv = torch.tensor([1.0, 1.0, -1.0, -1.0, 1.0])
    loss, r, clipped = clipped_surrogate(logp, old, adv, 0.2, 0.28)
    # A>0: −min(1.5, 1.28) = −1.28 (clipped); −min(0.5, 0.8) = −0.5. A<0: −min(−1.5, −1.28) = 1.5;
    # −min(−0.5, −0.8) = 0.8 (clipped); 1.25 < 1.28: not clipped (clip-higher leaves room).
    assert loss.flatten().tolist() == pytest.approx([-1.28, -0.5, 1.5, 0.8, -1.25])
    assert clipped.flatten().tolist() == [True, False, False, True, False]
    assert torch.allclose(r, ratio)
    loss.sum().backward()
    assert logp.grad is not None
    # d(−ρA)/d logp = −ρA where unclipped, 0 where the clipped branch is active.
    assert logp.grad.flatten().tolist() == pytest.approx([0.0, -0.5, 1.5, 0.0, -1.25])


def test_symmetric_clip_default() -> None:
    loss, _, clipped = clipped_surrogate(
        torch.tensor([[math.log(1.25)]]), torch.zeros(1, 1), torch.ones(1), 0.2, 0.2
    )
    assert loss.item() == pytest.approx(-1.2) and clipped.item()


PER_TOKEN = torch.tensor([[1.0, 2.0, 3.0], [4.0, 9.0, 9.0]])
MASK = torch.tensor([[1, 1, 1], [1, 0, 0]])
NORM = LossNorm(num_seqs=2, num_tokens=4, max_len=4)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("seq_mean_token_mean", (2.0 + 4.0) / 2),  # per-sequence means 2 and 4
        ("token_mean", (1 + 2 + 3 + 4) / 4),
        ("seq_mean_token_sum_norm", (1 + 2 + 3 + 4) / (2 * 4)),  # / (N · L_max)
    ],
)
def test_aggregation(mode: str, expected: float) -> None:
    assert aggregate(PER_TOKEN, MASK, mode, NORM).item() == pytest.approx(expected)
    # micro-batches with the global normalisers add up to the full-batch loss
    parts = aggregate(PER_TOKEN[:1], MASK[:1], mode, NORM) + aggregate(PER_TOKEN[1:], MASK[1:], mode, NORM)
    assert parts.item() == pytest.approx(expected)


def test_unknown_aggregation() -> None:
    with pytest.raises(ValueError):
        aggregate(PER_TOKEN, MASK, "sum", NORM)


def test_k3_gradient_stays_finite_where_exp_would_overflow() -> None:
    # verl clamps Δ to ±20 before exp (algorithms.md §4.7): without it, Δ = −100 gives e^{100} = inf in
    # float32, the value is still clamped to 10, but its gradient is 0 · inf = NaN and poisons the step
    logp = torch.tensor([-100.0, 100.0], requires_grad=True)
    k3 = kl_estimate(logp, torch.zeros(2), "k3")
    assert k3.tolist() == [10.0, 10.0]
    k3.sum().backward()
    assert logp.grad is not None and logp.grad.tolist() == [0.0, 0.0]
