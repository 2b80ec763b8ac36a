"""The policy loss: PPO-clip on the ratio to the sampling policy, an optional KL term, and aggregation.

Per token of completion i (``m`` the completion mask, ``A_i`` the sequence's advantage)::

    ρ_{i,t} = exp(log π_θ(y_t) − log π_old(y_t))
    ℓ_{i,t} = −min(ρ A_i, clip(ρ, 1 − ε_low, 1 + ε_high) A_i) + β · KL_{i,t}

With process credit (``algorithm.process_credit``) the advantage is per token, ``A_{i,t}`` in place of
``A_i``: the same formula, token by token (a ``[B]`` advantage is the ``[B, T]`` one constant along t).

``ε_high > ε_low`` is DAPO's clip-higher (room for low-probability tokens to grow).

``log ρ`` is clamped to ``±MAX_ABS_LOG_TOKEN_RATIO`` (20, as in verl's vanilla PPO loss) before the exp:
inside that range nothing changes, value or gradient; past it ``ρ`` is ``e^{±20}`` and its gradient 0, where
``e^{200}`` would be inf and the gradient NaN.

Dual clip (Ye et al. 2020, verl's ``clip_ratio_c``; ``algorithm.dual_clip_c``, token level only): where
``A < 0`` the loss is also bounded by ``−c·A`` (``c > 1``), ``ℓ = min(−min(ρA, clip(ρ)A), −c·A)``, i.e.
``−max(min(ρA, clip(ρ)A), c·A)``: a token the policy made far *more* likely than the sampler did while
its advantage is negative would otherwise put ``ρ·|A|``, unbounded, in the loss. Its gradient is 0 there.

Sequence level (GSPO, Zheng et al. 2025; ``algorithm.importance_sampling_level: sequence``): one ratio
per completion, the geometric mean of its tokens' ratios over the loss tokens,
``s_i = exp((1/|y_i|) Σ_t (log π_θ(y_t) − log π_old(y_t)))``, clipped per sequence, and the loss
``−min(s_i A_i, clip(s_i) A_i)`` per sequence, written on each of its tokens so that
``seq_mean_token_mean`` (the only aggregation allowed with it) gives GSPO's mean over sequences. With
per-token advantages ``A_{i,t}`` (process credit) it is GSPO-token: ``s_{i,t} = sg[s_i] · π_θ(y_t) /
sg[π_θ(y_t)]``, whose value is ``s_i`` and whose gradient flows token by token; with ``A_{i,t} = A_i``
it is GSPO, in value and gradient. The log of the ratio is capped at ``MAX_LOG_SEQ_RATIO`` (10, as in
verl's GSPO loss) before the exp: below the cap nothing changes, above it the ratio is ``e^10`` and its
gradient 0 (it is far outside any clip range there anyway).

The KL is to a frozen reference with ``Δ = log π_θ − log π_ref`` (Schulman's estimators):

* ``k1 = Δ`` (unbiased value, high variance, can be negative)
* ``k2 = ½ Δ²`` (its gradient is the true KL gradient)
* ``k3 = exp(−Δ) + Δ − 1`` (GRPO's choice; ≥ 0, low variance; as in verl's ``low_var_kl``, Δ is
  clamped to ±20 and the estimate to [−10, 10], so one token the policy made far less likely than the
  reference cannot dominate the loss and its gradient)

Aggregation (the normalisers are *global* over the whole batch, passed in, so that summing the
gradients of micro-batches gives exactly the full-batch loss):

* ``seq_mean_token_mean`` (GRPO): ``(1/N) Σ_i (Σ_t m ℓ / Σ_t m)``
* ``token_mean`` (DAPO): ``Σ_{i,t} m ℓ / Σ_{i,t} m``
* ``seq_mean_token_sum_norm`` (Dr. GRPO): ``Σ_{i,t} m ℓ / (N · L_max)``, a constant normaliser, so a
  long wrong answer is not penalised less per token than a short one.
* ``bnpo`` (TRL's): ``(1/K) Σ_k Σ_{i∈k,t} m ℓ / Σ_{i∈k,t} m`` over the K micro-batches of
  ``micro_batch_size`` sequences: each micro-batch's own token mean, averaged as gradient accumulation
  averages them. Its result depends on the micro-batch size (``token_mean`` when one micro-batch holds the
  batch); it is there to reproduce a TRL run. Each sequence carries its weight ``1 / (K · Σ_{i∈k,t} m)``
  (``seq_weights``), so a micro-batch run with fewer sequences than TRL's still sums to the same loss.

``N`` counts the sequences in the loss (masked, i.e. invalid, sequences excluded), ``Σ m`` their tokens.

**Non-finite inputs.** The clamps above bound ±inf, not NaN: ``torch.clamp`` keeps NaN, so a NaN
log-prob (a bad forward pass: an fp16/bf16 activation past its range) makes its token's ratio, or at the
sequence level its whole completion's ``s_i``, NaN, and the loss with it. Nothing here hides that: these
functions return what they are given, and :func:`nonfinite_tokens` finds the loss tokens with a
non-finite input before the loss, so that the trainer can skip the optimizer step (``Trainer._optimize``
says why it skips the step rather than masking the tokens).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = [
    "MAX_ABS_LOG_TOKEN_RATIO",
    "MAX_LOG_SEQ_RATIO",
    "LossNorm",
    "PolicyLoss",
    "aggregate",
    "clipped_surrogate",
    "dual_clip",
    "kl_estimate",
    "nonfinite_tokens",
    "policy_loss",
    "sequence_surrogate",
    "token_logprobs",
]

MAX_LOG_SEQ_RATIO = 10.0
"""The cap on a sequence's log importance ratio (GSPO, and GSPO-token's per-token form) before the exp,
verl's ``clamp(max=10.0)`` in its GSPO loss, for numerical safety. A completion sampled by a stale policy
can have a mean log-ratio past 88.7, where its exp is inf in float32 (and bf16): the loss is then inf
(``A < 0``: ``−s·A``) or NaN (``A = 0``: ``inf · 0``), and even where the min picks the finite clipped
branch (``A > 0``) the backward is ``0 · e^x`` = NaN, which poisons every weight in one optimizer step.
``e^10 ≈ 22026`` is far outside any clip range, so the min decides as it would have, and the clamp's
gradient there is 0 (the clipped branch's is 0 too). Below the cap the ratio is unchanged, value and
gradient. No lower cap: ``e^x`` of a very negative ``x`` is 0, which is finite. A NaN mean log-ratio
(one NaN log-prob among the completion's tokens) passes the cap: see :func:`nonfinite_tokens`."""

MAX_ABS_LOG_TOKEN_RATIO = 20.0
"""The clamp on a token's log importance ratio ``log π_θ − log π_old`` before the exp (token level, so
under the dual clip too), verl's ``torch.clamp(negative_approx_kl, min=-20.0, max=20.0)`` in its vanilla
PPO loss, for numerical safety. A token sampled by a stale policy (or, with ``old_logprobs: sampler``, one
the sampler found far less likely than the policy does) can have a log-ratio past 88.7, where its exp is
inf in float32: the loss is then inf (``A < 0``: ``−ρ·A``) or NaN (``A = 0``: ``inf · 0``), and even where
the min (``A > 0``) or the dual clip's bound picks a finite branch, the backward is ``0 · e^x`` = NaN,
which poisons every weight in one optimizer step. ``e^20 ≈ 4.9e8`` is far outside any clip range, so the
min and the dual clip decide as they would have, and the clamp's gradient there is 0. Symmetric as in
verl: below −20 the ratio is ``e^−20 ≈ 2e-9`` instead of about 0 (finite either way). Inside ±20 the
ratio is unchanged, value and gradient, bit for bit. (k3's ``Δ`` to the reference is clamped to ±20 in
:func:`kl_estimate` for the same reason.) A NaN log-ratio passes the clamp as NaN: see
:func:`nonfinite_tokens`."""


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """``log softmax(logits / T)[tokens]``: logits ``[B, T, V]``, tokens ``[B, T]`` → ``[B, T]`` (float32)."""
    z = logits.float() / temperature
    return z.gather(-1, tokens.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(z, dim=-1)


def nonfinite_tokens(mask: torch.Tensor, *inputs: torch.Tensor) -> torch.Tensor:
    """``[B, T]`` bool: the loss tokens (``mask``) at which any of ``inputs`` is NaN or ±inf.

    ``inputs`` are the loss's per-token inputs, ``[B, T]`` (log π_θ, log π_old, log π_ref, process
    credit's advantages) or ``[B]`` (one advantage per sequence, counted on each of its loss tokens).
    Padding (``mask`` 0) is not looked at: it is not in the loss. ±inf is counted as NaN is: the clamps
    would bound the ratio of an infinite log-prob, but π_θ's −inf comes from a logit that overflowed,
    whose backward through the model is NaN all the same, and an old (sampler's) −inf is a sampled token
    its own sampler called impossible, a broken forward too; one rule for every input keeps the
    ``nonfinite_tokens`` metric simple to read.
    """
    keep = mask.bool()
    bad = torch.zeros_like(keep)
    for x in inputs:
        x = x.detach()
        bad |= ~torch.isfinite(x.unsqueeze(-1) if x.dim() == 1 else x).expand_as(keep)
    return bad & keep


def kl_estimate(logp: torch.Tensor, ref_logp: torch.Tensor, kind: str = "k3") -> torch.Tensor:
    """Per-token KL(π_θ ‖ π_ref) estimate from ``Δ = logp − ref_logp`` (see the module docstring)."""
    delta = logp - ref_logp
    if kind == "k1":
        return delta
    if kind == "k2":
        return 0.5 * delta**2
    if kind == "k3":
        d = delta.clamp(-20.0, 20.0)
        return (torch.exp(-d) + d - 1.0).clamp(-10.0, 10.0)
    raise ValueError(f"unknown KL estimator {kind!r} (k1, k2, k3)")


def clipped_surrogate(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    eps_low: float,
    eps_high: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-token PPO-clip loss ``−min(ρA, clip(ρ, 1−ε_low, 1+ε_high)A)``, ``log ρ`` clamped to
    ``±MAX_ABS_LOG_TOKEN_RATIO`` before the exp.

    Args:
        logp: ``[B, T]`` log π_θ of the sampled tokens (with grad).
        old_logp: ``[B, T]`` log π_old (the sampling policy); no gradient flows into it.
        advantages: ``[B]`` one advantage per sequence, or ``[B, T]`` one per token (process credit).

    Returns:
        ``(loss [B, T], ratio [B, T], clipped [B, T] bool)`` — ``clipped`` marks tokens where the clipped
        branch was the active one (the gradient is zero there), for the clip-fraction metric.
    """
    log_ratio = (logp - old_logp.detach()).clamp(-MAX_ABS_LOG_TOKEN_RATIO, MAX_ABS_LOG_TOKEN_RATIO)
    ratio = torch.exp(log_ratio)
    loss, clipped = _ppo_clip(ratio, advantages, eps_low, eps_high)
    return loss, ratio, clipped


def _per_token(advantages: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A ``[B]`` advantage as ``[B, 1]`` (broadcast along t), a ``[B, T]`` one as is, in ``like``'s dtype."""
    return (advantages.unsqueeze(-1) if advantages.dim() == 1 else advantages).to(like.dtype)


def _ppo_clip(
    ratio: torch.Tensor, advantages: torch.Tensor, eps_low: float, eps_high: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(−min(ρA, clip(ρ)A), where the clipped branch is active)``, whatever level ``ρ`` is taken at."""
    adv = _per_token(advantages, ratio)
    unclipped = ratio * adv
    clipped = ratio.clamp(1.0 - eps_low, 1.0 + eps_high) * adv
    loss = -torch.minimum(unclipped, clipped)
    return loss, clipped < unclipped


def sequence_surrogate(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps_low: float,
    eps_high: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """GSPO's sequence-level clipped loss (GSPO-token with ``[B, T]`` advantages), see the module docstring.

    ``mask`` (``[B, T]``, the completion mask) picks the tokens whose log-ratios are averaged: padding
    never enters ``s_i`` (a completion without tokens has ``s_i = 1``). With ``[B]`` advantages the
    gradient flows through ``s_i`` itself, ``∂s_i/∂log π_θ(y_t) = s_i / |y_i|``; with ``[B, T]`` ones
    through ``π_θ(y_t) / sg[π_θ(y_t)]``, ``∂s_{i,t}/∂log π_θ(y_t) = s_i``, which
    ``seq_mean_token_mean``'s ``1/|y_i|`` brings to the same number when ``A_{i,t} = A_i``.

    Returns:
        ``(loss [B, T], ratio [B, T], clipped [B, T] bool)`` as :func:`clipped_surrogate`, each sequence's
        values repeated on its tokens: the per-token metrics count a clipped sequence once per token.
    """
    keep = mask.bool()
    log_ratio = torch.where(keep, logp - old_logp.detach(), torch.zeros_like(logp))
    log_s = log_ratio.sum(dim=-1) / keep.sum(dim=-1).clamp(min=1).to(logp.dtype)
    if advantages.dim() == 1:
        ratio = torch.exp(log_s.clamp(max=MAX_LOG_SEQ_RATIO)).unsqueeze(-1).expand_as(logp)
    else:
        log_st = log_s.detach().unsqueeze(-1) + (logp - logp.detach())
        ratio = torch.exp(log_st.clamp(max=MAX_LOG_SEQ_RATIO))
    loss, clipped = _ppo_clip(ratio, advantages, eps_low, eps_high)
    return loss, ratio, clipped


def dual_clip(loss: torch.Tensor, advantages: torch.Tensor, c: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Bound a per-token PPO-clip loss by ``−c·A`` where ``A < 0`` (dual clip); ``A ≥ 0`` is left as is.

    Returns ``(loss, dual_clipped)``, ``dual_clipped`` marking the tokens where the bound was the active
    one (``ρ > c`` there; the gradient is zero), for the ``dual_clip_frac`` metric.
    """
    adv = _per_token(advantages, loss).expand_as(loss)
    bound = -c * adv
    dual = (adv < 0) & (bound < loss)
    return torch.where(dual, bound, loss), dual


@dataclass(frozen=True)
class PolicyLoss:
    """The per-token policy loss of one micro-batch and what its metrics count (all ``[B, T]``)."""

    per_token: torch.Tensor
    ratio: torch.Tensor
    clipped: torch.Tensor
    dual_clipped: torch.Tensor


def policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    level: str,
    eps_low: float,
    eps_high: float,
    dual_clip_c: float | None = None,
) -> PolicyLoss:
    """The policy term the config asks for: PPO-clip at ``level`` ``token`` or ``sequence`` (GSPO), then
    the dual clip where ``dual_clip_c`` is set (token level only: the config refuses it with GSPO)."""
    if level == "token":
        loss, ratio, clipped = clipped_surrogate(logp, old_logp, advantages, eps_low, eps_high)
    elif level == "sequence":
        loss, ratio, clipped = sequence_surrogate(logp, old_logp, advantages, mask, eps_low, eps_high)
    else:
        raise ValueError(f"unknown importance sampling level {level!r} (token, sequence)")
    if dual_clip_c is None:
        return PolicyLoss(loss, ratio, clipped, torch.zeros_like(clipped))
    if level != "token":
        raise ValueError("the dual clip applies at the token level only (as in verl, whose GSPO has none)")
    loss, dual = dual_clip(loss, advantages, dual_clip_c)
    return PolicyLoss(loss, ratio, clipped, dual)


@dataclass(frozen=True)
class LossNorm:
    """Global normalisers of the batch: sequences in the loss, their tokens, and L_max."""

    num_seqs: int
    num_tokens: int
    max_len: int


def aggregate(
    per_token: torch.Tensor,
    mask: torch.Tensor,
    mode: str,
    norm: LossNorm,
    seq_weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """Reduce a ``[B, T]`` per-token loss of one micro-batch to its share of the batch loss.

    ``mask`` is the completion mask (0 on padding and on masked sequences). Summing the return value over
    all micro-batches gives the loss of the whole batch under ``mode``. ``seq_weights`` (``[B]``, ``bnpo``
    only): each sequence's ``1 / (K · tokens of its micro-batch)``.
    """
    m = mask.to(per_token.dtype)
    summed = per_token * m
    if mode == "bnpo":
        if seq_weights is None:
            raise ValueError("bnpo needs each sequence's weight (seq_weights)")
        return (summed.sum(dim=-1) * seq_weights.to(per_token.dtype)).sum()
    if mode == "seq_mean_token_mean":
        lengths = m.sum(dim=-1)
        per_seq = summed.sum(dim=-1) / lengths.clamp(min=1)
        return per_seq.sum() / max(norm.num_seqs, 1)
    if mode == "token_mean":
        return summed.sum() / max(norm.num_tokens, 1)
    if mode == "seq_mean_token_sum_norm":
        return summed.sum() / max(norm.num_seqs * norm.max_len, 1)
    raise ValueError(f"unknown loss aggregation {mode!r}")
