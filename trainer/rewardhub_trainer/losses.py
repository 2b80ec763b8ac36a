"""The policy loss: PPO-clip on the ratio to the sampling policy, an optional KL term, and aggregation.

Per token of completion i (``m`` the completion mask, ``A_i`` the sequence's advantage)::

    ρ_{i,t} = exp(log π_θ(y_t) − log π_old(y_t))
    ℓ_{i,t} = −min(ρ A_i, clip(ρ, 1 − ε_low, 1 + ε_high) A_i) + β · KL_{i,t}

With process credit (``algorithm.process_credit``) the advantage is per token, ``A_{i,t}`` in place of
``A_i``: the same formula, token by token (a ``[B]`` advantage is the ``[B, T]`` one constant along t).

``ε_high > ε_low`` is DAPO's clip-higher (room for low-probability tokens to grow). The KL is to a frozen
reference with ``Δ = log π_θ − log π_ref`` (Schulman's estimators):

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
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["LossNorm", "aggregate", "clipped_surrogate", "kl_estimate", "token_logprobs"]


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """``log softmax(logits / T)[tokens]``: logits ``[B, T, V]``, tokens ``[B, T]`` → ``[B, T]`` (float32)."""
    z = logits.float() / temperature
    return z.gather(-1, tokens.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(z, dim=-1)


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
    """Per-token PPO-clip loss ``−min(ρA, clip(ρ, 1−ε_low, 1+ε_high)A)``.

    Args:
        logp: ``[B, T]`` log π_θ of the sampled tokens (with grad).
        old_logp: ``[B, T]`` log π_old (the sampling policy); no gradient flows into it.
        advantages: ``[B]`` one advantage per sequence, or ``[B, T]`` one per token (process credit).

    Returns:
        ``(loss [B, T], ratio [B, T], clipped [B, T] bool)`` — ``clipped`` marks tokens where the clipped
        branch was the active one (the gradient is zero there), for the clip-fraction metric.
    """
    ratio = torch.exp(logp - old_logp.detach())
    adv = (advantages.unsqueeze(-1) if advantages.dim() == 1 else advantages).to(ratio.dtype)
    unclipped = ratio * adv
    clipped = ratio.clamp(1.0 - eps_low, 1.0 + eps_high) * adv
    loss = -torch.minimum(unclipped, clipped)
    return loss, ratio, clipped < unclipped


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
