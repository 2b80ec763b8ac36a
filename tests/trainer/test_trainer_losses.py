"""PPO-clip, KL estimators, logprobs and loss aggregation against hand-computed numbers."""

from __future__ import annotations

import math

import pytest
import torch

from rewardhub_trainer.losses import (
    MAX_ABS_LOG_TOKEN_RATIO,
    MAX_LOG_SEQ_RATIO,
    LossNorm,
    aggregate,
    clipped_surrogate,
    dual_clip,
    kl_estimate,
    nonfinite_tokens,
    policy_loss,
    token_logprobs,
)


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


# ---- GSPO (sequence-level ratio), GSPO-token, dual clip ----

# two completions of lengths 2 and 3 (T = 3); log π_θ − log π_old per token, the padding's garbage
LOG_RATIO = torch.tensor([[0.1, 0.3, 5.0], [-0.6, 0.0, 0.0]])
SEQ_MASK = torch.tensor([[1, 1, 0], [1, 1, 1]])
S0, S1 = math.exp(0.2), math.exp(-0.2)  # exp of the mean log-ratio over each completion's tokens


@pytest.mark.parametrize(
    ("eps", "expected", "clipped"),
    [
        # ε 0.2: s_0 = e^0.2 = 1.2214 > 1.2 with A > 0: −1.2, clipped; s_1 = e^−0.2 = 0.8187 > 0.8 with
        # A < 0: −min(−s_1, −0.8) = s_1, not clipped. (Per token, 0.1 → 1.105 is not clipped, 0.3 → 1.35 is.)
        ((0.2, 0.2), [-1.2, S1], [True, False]),
        # the GSPO paper's 3e-4 / 4e-4: both clipped, at 1.0004 and 0.9997
        ((3e-4, 4e-4), [-1.0004, 0.9997], [True, True]),
    ],
)
def test_gspo_takes_one_ratio_per_sequence_and_clips_it_per_sequence(
    eps: tuple[float, float], expected: list[float], clipped: list[bool]
) -> None:
    logp = LOG_RATIO.clone().requires_grad_(True)
    adv = torch.tensor([1.0, -1.0])
    pol = policy_loss(
        logp, torch.zeros(2, 3), adv, SEQ_MASK, level="sequence", eps_low=eps[0], eps_high=eps[1]
    )
    loss, ratio, was_clipped = pol.per_token, pol.ratio, pol.clipped
    # each sequence's ratio, loss and clip flag on every one of its tokens (the padding's ignored)
    assert ratio[0, :2].tolist() == pytest.approx([S0, S0]) and ratio[1].tolist() == pytest.approx([S1] * 3)
    assert loss[0, :2].tolist() == pytest.approx([expected[0]] * 2)
    assert loss[1].tolist() == pytest.approx([expected[1]] * 3)
    assert was_clipped[0, :2].tolist() == [clipped[0]] * 2 and was_clipped[1].tolist() == [clipped[1]] * 3
    # GSPO's objective, a mean over the sequences, is seq_mean_token_mean of the per-token loss
    total = aggregate(loss, SEQ_MASK, "seq_mean_token_mean", LossNorm(num_seqs=2, num_tokens=5, max_len=3))
    assert total.item() == pytest.approx(sum(expected) / 2, abs=1e-6)  # float32: 1.0004 − 0.9997
    total.backward()
    assert logp.grad is not None
    # ∂/∂ log π_θ(y_t) of (1/N) ℓ_i = −A_i s_i / (N |y_i|) where s_i is unclipped, else 0; 0 on padding
    g1 = 0.0 if clipped[1] else S1 / (2 * 3)
    assert logp.grad.flatten().tolist() == pytest.approx([0.0, 0.0, 0.0, g1, g1, g1])


def test_gspo_token_with_per_token_advantages_keeps_the_sequence_ratio_and_credits_each_token() -> None:
    """GSPO-token: s_{i,t} = sg[s_i] · π_θ(y_t)/sg[π_θ(y_t)] is s_i in value, its gradient s_i per token,
    and each token is clipped by the sign of its own advantage."""
    log_ratio = torch.tensor([[0.1, -0.1, 0.3], [0.5, 0.5, 0.0]])
    logp = log_ratio.clone().requires_grad_(True)
    adv = torch.tensor([[1.0, -2.0, 0.5], [1.0, -1.0, 0.0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    s0, s1 = math.exp(0.1), math.exp(0.5)  # 1.105 (inside 1 ± 0.2), 1.649 (above 1.2)
    pol = policy_loss(logp, torch.zeros(2, 3), adv, mask, level="sequence", eps_low=0.2, eps_high=0.2)
    assert pol.ratio[0].tolist() == pytest.approx([s0] * 3) and pol.ratio[1, :2].tolist() == pytest.approx(
        [s1] * 2
    )
    # sequence 1: the A > 0 token is clipped at 1.2, the A < 0 one is not (−min(−s_1, −1.2) = s_1)
    assert pol.per_token[0].tolist() == pytest.approx([-s0, 2 * s0, -0.5 * s0])
    assert pol.per_token[1, :2].tolist() == pytest.approx([-1.2, s1])
    assert pol.clipped[1, :2].tolist() == [True, False] and not pol.clipped[0].any()
    aggregate(pol.per_token, mask, "seq_mean_token_mean", LossNorm(2, 5, 3)).backward()
    assert logp.grad is not None
    # −A_{i,t} s_i / (N |y_i|), 0 where clipped
    assert logp.grad.flatten().tolist() == pytest.approx(
        [-s0 / 6, 2 * s0 / 6, -0.5 * s0 / 6, 0.0, s1 / 4, 0.0]
    )


def test_gspo_token_with_advantages_constant_along_t_is_gspo_in_value_and_gradient() -> None:
    gen = torch.Generator().manual_seed(0)
    b, t = 6, 5
    logp0 = torch.randn(b, t, generator=gen) * 0.3 - 1.0
    old = logp0 + torch.randn(b, t, generator=gen) * 0.3
    mask = (torch.arange(t) < torch.tensor([5, 3, 1, 0, 4, 2]).unsqueeze(-1)).long()  # one empty completion
    adv = torch.randn(b, generator=gen)
    norm = LossNorm(num_seqs=b, num_tokens=int(mask.sum()), max_len=t)
    out, grads = [], []
    for a in (adv, adv.unsqueeze(-1).expand(b, t)):
        logp = logp0.clone().requires_grad_(True)
        pol = policy_loss(logp, old, a, mask, level="sequence", eps_low=0.05, eps_high=0.05)
        aggregate(pol.per_token, mask, "seq_mean_token_mean", norm).backward()
        out.append(pol)
        grads.append(logp.grad)
    gspo, token = out
    assert torch.equal(gspo.ratio, token.ratio) and torch.equal(gspo.per_token, token.per_token)
    assert torch.equal(gspo.clipped, token.clipped)
    live = mask.bool()
    assert gspo.clipped[live].any() and not gspo.clipped[live].all()  # both branches of the min are taken
    assert grads[0] is not None and grads[1] is not None
    assert torch.allclose(grads[0], grads[1], rtol=1e-6, atol=1e-8) and grads[0].abs().sum() > 0


@pytest.mark.parametrize("per_token_adv", [False, True])
def test_a_huge_sequence_log_ratio_is_capped_so_the_loss_and_its_gradient_stay_finite(
    per_token_adv: bool,
) -> None:
    """A stale completion's mean log-ratio of 200 made s_i = e^200 = inf in float32: the loss was inf
    (A < 0) or NaN (A = 0), and where the clip picked the finite branch (A > 0) the gradient was
    0 · inf = NaN. verl clamps the log ratio at 10 before the exp; so do GSPO and GSPO-token here."""
    logp = torch.full((3, 2), 200.0).requires_grad_(True)
    old, mask = torch.zeros(3, 2), torch.ones(3, 2)
    adv = torch.tensor([1.0, -1.0, 0.0])
    a = adv.unsqueeze(-1).expand(3, 2) if per_token_adv else adv
    pol = policy_loss(logp, old, a, mask, level="sequence", eps_low=0.2, eps_high=0.2)
    capped = math.exp(MAX_LOG_SEQ_RATIO)
    assert pol.ratio.flatten().tolist() == pytest.approx([capped] * 6)
    # A > 0: the clip's 1.2; A < 0: the unclipped −s·A at the cap; A = 0: 0
    assert pol.per_token.flatten().tolist() == pytest.approx([-1.2, -1.2, capped, capped, 0.0, 0.0])
    total = aggregate(pol.per_token, mask, "seq_mean_token_mean", LossNorm(3, 6, 2))
    assert math.isfinite(total.item())
    total.backward()
    assert logp.grad is not None and logp.grad.tolist() == [[0.0] * 2] * 3  # past the cap: no gradient


@pytest.mark.parametrize("per_token_adv", [False, True])
def test_a_huge_token_log_ratio_is_clamped_so_the_loss_and_its_gradient_stay_finite(
    per_token_adv: bool,
) -> None:
    """A stale token's log-ratio of 200 made ρ = e^200 = inf in float32: the loss was inf (A < 0) or NaN
    (A = 0), and where the clip picked the finite branch (A > 0) the gradient was 0 · inf = NaN. verl
    clamps the per-token log-ratio to ±20 before the exp; so does the token level here. A log-ratio of 15
    (inside the clamp) keeps its value and its gradient."""
    logp = torch.tensor([[200.0, -200.0, 15.0]] * 3).requires_grad_(True)
    old, mask = torch.zeros(3, 3), torch.ones(3, 3)
    adv = torch.tensor([1.0, -1.0, 0.0])
    a = adv.unsqueeze(-1).expand(3, 3) if per_token_adv else adv
    pol = policy_loss(logp, old, a, mask, level="token", eps_low=0.2, eps_high=0.2)
    hi, lo, mid = math.exp(MAX_ABS_LOG_TOKEN_RATIO), math.exp(-MAX_ABS_LOG_TOKEN_RATIO), math.exp(15.0)
    assert pol.ratio.tolist() == [pytest.approx([hi, lo, mid])] * 3
    # A > 0: the clip's 1.2 above it, −ρ below; A < 0: −ρA above it, the clip's 0.8 below; A = 0: 0
    assert pol.per_token.tolist() == [
        pytest.approx([-1.2, -lo, -1.2]),
        pytest.approx([hi, 0.8, mid]),
        [0.0, 0.0, 0.0],
    ]
    total = aggregate(pol.per_token, mask, "token_mean", LossNorm(3, 9, 3))
    assert math.isfinite(total.item())
    total.backward()
    assert logp.grad is not None
    # past the clamp no gradient; at 15 with A < 0 (unclipped) d(−ρA)/d logp = ρ, over 9 tokens
    assert logp.grad.tolist() == [[0.0] * 3, [0.0, 0.0, pytest.approx(mid / 9)], [0.0] * 3]


def test_the_dual_clip_of_a_huge_token_log_ratio_has_a_finite_gradient() -> None:
    """With the dual clip, ``A < 0`` and a log-ratio of 200 the bound ``−c·A`` is the loss (finite even on
    the old code) but the backward through the unbounded branch was 0 · e^200 = NaN."""
    logp = torch.tensor([[200.0], [200.0]]).requires_grad_(True)
    adv = torch.tensor([-1.0, 1.0])
    pol = policy_loss(
        logp,
        torch.zeros(2, 1),
        adv,
        torch.ones(2, 1),
        level="token",
        eps_low=0.2,
        eps_high=0.2,
        dual_clip_c=3.0,
    )
    assert pol.per_token.flatten().tolist() == pytest.approx([3.0, -1.2])
    assert pol.dual_clipped.flatten().tolist() == [True, False]
    pol.per_token.sum().backward()
    assert logp.grad is not None and logp.grad.flatten().tolist() == [0.0, 0.0]


@pytest.mark.parametrize("per_token_adv", [False, True])
def test_token_level_is_the_old_ppo_clip_bit_for_bit(per_token_adv: bool) -> None:
    """``importance_sampling_level: token`` (the default) without dual clip: exactly −min(ρA, clip(ρ)A)."""
    gen = torch.Generator().manual_seed(1)
    logp0 = torch.randn(5, 7, generator=gen) - 1.0
    old = logp0 + 0.4 * torch.randn(5, 7, generator=gen)
    adv = torch.randn(5, 7, generator=gen) if per_token_adv else torch.randn(5, generator=gen)
    a = adv if per_token_adv else adv.unsqueeze(-1)
    logp = logp0.clone().requires_grad_(True)
    pol = policy_loss(logp, old, adv, torch.ones(5, 7), level="token", eps_low=0.2, eps_high=0.28)
    pol.per_token.sum().backward()
    ref_logp = logp0.clone().requires_grad_(True)
    rho = torch.exp(ref_logp - old)
    reference = torch.maximum(-rho * a, -rho.clamp(0.8, 1.28) * a)  # = −min(ρA, clip(ρ)A), negation exact
    reference.sum().backward()
    assert torch.equal(pol.per_token, reference) and torch.equal(pol.ratio, rho)
    assert torch.equal(pol.clipped, rho.clamp(0.8, 1.28) * a < rho * a) and not pol.dual_clipped.any()
    assert pol.clipped.any() and not pol.clipped.all()
    assert logp.grad is not None and ref_logp.grad is not None and torch.equal(logp.grad, ref_logp.grad)


def test_dual_clip_bounds_a_negative_advantage_s_loss_at_c_times_its_size() -> None:
    # ρ = 100, 2, 0.5 with A = −1, ρ = 100 with A = +1; ε 0.2, c = 3
    rho = torch.tensor([[100.0], [2.0], [0.5], [100.0]])
    logp = rho.log().requires_grad_(True)
    adv = torch.tensor([-1.0, -1.0, -1.0, 1.0])
    pol = policy_loss(
        logp,
        torch.zeros(4, 1),
        adv,
        torch.ones(4, 1),
        level="token",
        eps_low=0.2,
        eps_high=0.2,
        dual_clip_c=3.0,
    )
    # −max(min(ρA, clip(ρ)A), cA): 100|A| bounded at 3; 2 under the bound; 0.8 the clip's; A > 0: −1.2
    assert pol.per_token.flatten().tolist() == pytest.approx([3.0, 2.0, 0.8, -1.2])
    assert pol.dual_clipped.flatten().tolist() == [True, False, False, False]
    assert pol.clipped.flatten().tolist() == [False, False, True, True]
    pol.per_token.sum().backward()
    assert logp.grad is not None
    assert logp.grad.flatten().tolist() == pytest.approx([0.0, 2.0, 0.0, 0.0])  # −ρA only on ρ = 2
    # off (None), the same tokens give PPO-clip's unbounded 100
    off = policy_loss(
        rho.log(), torch.zeros(4, 1), adv, torch.ones(4, 1), level="token", eps_low=0.2, eps_high=0.2
    )
    assert off.per_token.flatten().tolist() == pytest.approx([100.0, 2.0, 0.8, -1.2])


def test_dual_clip_reads_per_token_advantages_and_is_refused_at_sequence_level() -> None:
    # ρ = 10 on three tokens whose advantages are −2, 0.5, −0.1 (process credit); ε 0.2, c = 3
    logp, old, mask = torch.full((1, 3), math.log(10.0)), torch.zeros(1, 3), torch.ones(1, 3)
    adv = torch.tensor([[-2.0, 0.5, -0.1]])
    pol = policy_loss(logp, old, adv, mask, level="token", eps_low=0.2, eps_high=0.2, dual_clip_c=3.0)
    # A < 0: min(10|A|, 3|A|) = 6 and 0.3; A > 0: −min(5, 0.6) = −0.6, untouched
    assert pol.per_token.flatten().tolist() == pytest.approx([6.0, -0.6, 0.3])
    assert pol.dual_clipped.flatten().tolist() == [True, False, True]
    # the same bound applied to a given per-token loss
    loss, dual = dual_clip(torch.tensor([[20.0, -0.6, 0.2]]), adv, 3.0)
    assert loss.flatten().tolist() == pytest.approx([6.0, -0.6, 0.2]) and dual.flatten().tolist() == [
        True,
        False,
        False,
    ]
    with pytest.raises(ValueError, match="token level only"):
        policy_loss(logp, old, adv, mask, level="sequence", eps_low=0.2, eps_high=0.2, dual_clip_c=3.0)


@pytest.mark.parametrize("level", ["token", "sequence"])
def test_a_nan_log_ratio_passes_the_clamps_and_nonfinite_tokens_finds_it(level: str) -> None:
    """``torch.clamp`` keeps NaN: one NaN log-prob makes its token's loss NaN (at the sequence level its
    whole completion's), which the loss does not hide; :func:`nonfinite_tokens` finds the loss tokens with
    a non-finite input (NaN or ±inf log-probs, an advantage) before the loss, padding left out."""
    logp = torch.tensor([[-1.0, math.nan, -1.0], [-1.0, -1.0, math.nan]])
    old = torch.tensor([[-1.0, -1.0, -1.0], [-math.inf, -1.0, -1.0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])  # the second sequence's NaN is on its padding
    adv = torch.tensor([1.0, -1.0])
    pol = policy_loss(logp, old, adv, mask, level=level, eps_low=0.2, eps_high=0.2)
    nan_at = torch.isnan(pol.per_token)
    assert nan_at[0, 1] and (nan_at[0].all() if level == "sequence" else not nan_at[0, [0, 2]].any())
    assert nonfinite_tokens(mask, logp, old, adv).tolist() == [[False, True, False], [True, False, False]]
    assert nonfinite_tokens(mask, logp.nan_to_num(0.0), adv).sum() == 0
    assert nonfinite_tokens(mask, torch.tensor([math.nan, 0.0])).tolist() == [[True] * 3, [False] * 3]
