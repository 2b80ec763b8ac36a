"""Advantage estimators of the GRPO family, with invalid rewards masked out.

Every function takes rewards as a ``[B, G]`` float tensor (B groups of G completions) in which an
*invalid* reward (the service answered ``valid: false``: a timeout, an unreadable reference...) is NaN,
and returns an :class:`Advantages`: per-completion values and a boolean ``mask`` of the completions that
take part in the loss.

**Masking rule.** An invalid reward is not the model's fault, so it must not be read as 0 ("wrong"): it
is left out of every statistic (group means, stds and medians are over the *valid* members only, and so
are GDPO's batch statistics) and out of the loss (``mask`` is False, and the loss normalisers do not
count it). A group whose members are all invalid therefore contributes no gradient at all. A valid group
member whose advantage happens to be 0 (a zero-variance group) stays in the mask: it is real data, it
counts in the loss denominators exactly as in TRL/verl, and it still feels the KL term.

Statistics: ``std`` is the sample standard deviation (Bessel, as ``torch.std``, TRL and verl), taken as
0 when fewer than two members are valid (so a lone valid member gets advantage 0, not NaN).

Formulas (``r`` a group's valid rewards, ``eps`` = ``std_eps``):

* GRPO:    ``A_i = (r_i − mean(r)) / (std(r) + eps)``; with batch scaling ``std`` is that of every valid
  reward in the batch, with no scaling there is no division (TRL's ``scale_rewards`` group/batch/none)
* Dr. GRPO: ``A_i = r_i − mean(r)`` (no std: it favours too-easy and too-hard questions)
* DAPO:    as GRPO; DAPO's other parts are elsewhere (clip-higher and token-mean in ``losses``, dynamic
  sampling in the trainer, overlong shaping added to ``r`` by :func:`overlong_penalty`)
* GDPO:    per reward component n: ``A_n = (r_n − mean_g r_n) / (std_g r_n + eps)``; ``A = Σ_n w_n A_n``;
  then over the batch: ``Â = (A − mean_batch A) / (std_batch A + eps)``
* RLOO:    ``A_i = r_i − mean_{j≠i} r_j = n/(n−1) · (r_i − mean(r))`` over the ``n`` valid members (the
  leave-one-out baseline; 0 when fewer than two are valid: no other member to compare with)
* MC-GRPO: G+1 samples, ``b = median(r)`` (the lower median, so it is a member), ``A_i = r_i − b``; the
  pivot (the member equal to ``b``, advantage 0) is masked out, leaving G gradient samples. Optional MAD
  scaling divides by ``max(MAD, 0.5·std, floor)``.

**Process (dense) credit** (algorithms.md §1.8): one advantage per *token* from a PRM's step scores
``s_{i,k}`` in [0, 1] (or an implicit PRM's process rewards, ``algorithm.process_step_value``), step k of completion i ending on token ``t_{i,k}`` (``|y_i|`` tokens):

* PURE (``pure_min``, min-form credit): ``r_k = 2 s_k − 1`` (``p(+) − p(−)`` of a two-class PRM; an
  implicit PRM's (PRIME's) ``r_k`` is its process reward ``β Σ log π_φ/π_ref`` over the step, taken as
  is: its ``s_k`` is σ of the running sum, a value; the trainer makes ``r_k``, process.py),
  ``w_k = softmax_k(−r_k / T)``, the step reward ``r'_k = w_k r_k`` on token ``t_k`` (``Σ_k r'_k ≈ min_k
  r_k``); RLOO baselines over the group's other valid members ``j``: the process reward per token
  ``b_i = Σ_{j≠i} R_j / Σ_{j≠i} |y_j|`` (``R_j = Σ_k r'_{j,k}``; PURE's ``--reward_baseline token``) is
  taken off every token, and the outcome reward ``o_i`` (the item's score) goes on the last token as
  ``c · (o_i − mean_{j≠i} o_j)``; returns with γ = 1::

      A_{i,t} = Σ_{k: t_k ≥ t} r'_{i,k} − b_i · (|y_i| − t) + c · (o_i − mean_{j≠i} o_j)

  (0 for a member with no other valid member to compare with).
* DeepSeekMath process supervision (``grpo_process``): ``r̃_{i,k} = (s_{i,k} − mean(S)) / (std(S) + eps)``
  with ``S`` every step score of the group's valid members, ``A_{i,t} = Σ_{k: t_k ≥ t} r̃_{i,k}``. A sum
  form: PURE found such credit reward-hacked from the start of training (padding with steps the PRM
  likes pays); ``pure_min`` is the recommended one.

* PRIME (``prime``, arXiv 2502.01456): an implicit PRM's process rewards ``r_{i,k}`` (``β Σ log
  π_φ/π_ref`` over step k, its ``process_reward``) on tokens ``t_{i,k}``, first divided by the largest
  ``|Σ_{k: t_k ≥ t} r_{i,k}|`` over the batch's members and tokens (+1e-6; PRIME's ``prime_norm:
  batch_norm``, ``process_norm``); leave-one-out baselines over the ``K`` valid members of the group:
  each token loses the others' mean process reward per token, and the outcome ``o_i`` (the item's
  score, times ``c``) the others' mean outcome; returns with γ = 1, summed::

      A_{i,t} = Σ_{s ≥ t} [ r_{i,s} − 1/(K−1) Σ_{j≠i} R_j / |y_j| ] + c · (o_i − 1/(K−1) Σ_{j≠i} o_j)

  (``r_{i,s}`` the reward placed on token s, 0 off the step ends; ``R_j = Σ_k r_{j,k}``), then
  whitened: ``(A − mean) / sqrt(var + 1e-8)``, the mean and sample variance over every token of every
  compared member in the batch (0 for a member with no other valid member to compare with, which is
  left out of both).

All mask a member without step scores as an invalid one, and put ``A_{i,0}`` in ``values``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch

__all__ = [
    "Advantages",
    "dr_grpo_advantages",
    "gdpo_advantages",
    "grpo_advantages",
    "group_mean_std",
    "mc_grpo_advantages",
    "overlong_penalty",
    "grpo_process_advantages",
    "prime_advantages",
    "pure_min_advantages",
    "rloo_advantages",
    "zero_variance_groups",
    "component_matrix",
]


@dataclass
class Advantages:
    values: torch.Tensor  # [B, G] float, 0 where masked
    mask: torch.Tensor  # [B, G] bool, True = in the loss
    # process credit only: tokens[b][g] is completion (b, g)'s [|y|] per-token advantages (0 where masked);
    # None: one advantage per completion (values)
    tokens: list[list[torch.Tensor]] | None = None


# One completion's step values: (the completion token on which the step ends, its value), in step order;
# None when the item has none to read (masked, as an invalid one). The value is a step score s in [0, 1],
# an implicit PRM's process reward, or (pure_min) the step reward r_k made of either
StepScores = Sequence[tuple[int, float]] | None


def group_mean_std(rewards: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """NaN-aware per-group ``(mean, sample std, valid count)`` over the last dim, each ``[B, 1]``.

    The mean of an all-invalid group is 0 and its std 0; the std of a group with one valid member is 0.
    A group whose valid members are all equal has that value as its mean, exactly: sum-then-divide makes
    three 0.1s a mean of 0.10000000000000002, and its members advantages of ~1e-13 instead of 0.
    """
    valid = ~torch.isnan(rewards)
    count = valid.sum(dim=-1, keepdim=True)
    filled = torch.where(valid, rewards, torch.zeros_like(rewards))
    mean = filled.sum(dim=-1, keepdim=True) / count.clamp(min=1)
    lo = torch.where(valid, rewards, torch.full_like(rewards, torch.inf)).amin(dim=-1, keepdim=True)
    hi = torch.where(valid, rewards, torch.full_like(rewards, -torch.inf)).amax(dim=-1, keepdim=True)
    mean = torch.where((count >= 1) & (lo == hi), lo, mean)
    sq = torch.where(valid, (rewards - mean) ** 2, torch.zeros_like(rewards)).sum(dim=-1, keepdim=True)
    var = sq / (count - 1).clamp(min=1)
    std = torch.where(count >= 2, var.sqrt(), torch.zeros_like(var))
    return mean, std, count


def _finish(values: torch.Tensor, valid: torch.Tensor) -> Advantages:
    return Advantages(values=torch.where(valid, values, torch.zeros_like(values)), mask=valid)


def grpo_advantages(rewards: torch.Tensor, eps: float = 1e-4, scale: str = "group") -> Advantages:
    """GRPO (DeepSeekMath): ``(r − mean) / (std + eps)`` per group, valid members only.

    ``scale`` picks the std (TRL's ``scale_rewards``): ``group`` the group's own; ``batch`` one std of
    every valid reward in the batch (so a group with little spread is not blown up to unit scale);
    ``none`` no division at all (Dr. GRPO's advantage).
    """
    if scale == "none":
        return dr_grpo_advantages(rewards)
    if scale not in ("group", "batch"):
        raise ValueError(f"unknown reward scaling {scale!r} (group, batch, none)")
    mean, std, _ = group_mean_std(rewards)
    if scale == "batch":
        _, std, _ = group_mean_std(rewards.reshape(1, -1))
    return _finish((rewards - mean) / (std + eps), ~torch.isnan(rewards))


def dr_grpo_advantages(rewards: torch.Tensor) -> Advantages:
    """Dr. GRPO: ``r − mean`` per group (no std division)."""
    mean, _, _ = group_mean_std(rewards)
    return _finish(rewards - mean, ~torch.isnan(rewards))


def rloo_advantages(rewards: torch.Tensor) -> Advantages:
    """RLOO: ``r_i`` minus the mean of the *other* valid members of its group."""
    mean, _, count = group_mean_std(rewards)
    n = count.to(rewards.dtype)
    scale = torch.where(count >= 2, n / (n - 1).clamp(min=1), torch.zeros_like(n))
    return _finish((rewards - mean) * scale, ~torch.isnan(rewards))


def gdpo_advantages(
    components: torch.Tensor,
    valid: torch.Tensor,
    weights: Sequence[float] | None = None,
    eps: float = 1e-4,
) -> Advantages:
    """GDPO: normalise each reward component within its group, weight and sum, then normalise over the batch.

    Args:
        components: ``[B, G, K]`` component values; NaN where a component is missing for an item.
        valid: ``[B, G]`` bool, the item's overall result was valid (invalid items are masked).
        weights: ``w_n`` (default all 1).
        eps: the std epsilon of both normalisations.

    A component missing for a valid item contributes nothing to that item's sum (its own group statistics
    ignore it), which is "no signal from this component", not "scored 0".
    """
    k = components.shape[-1]
    w = torch.tensor(list(weights) if weights is not None else [1.0] * k, dtype=components.dtype)
    comps = torch.where(valid.unsqueeze(-1), components, torch.full_like(components, float("nan")))
    per = []
    for n in range(k):
        r = comps[..., n]
        mean, std, _ = group_mean_std(r)
        a = (r - mean) / (std + eps)
        per.append(torch.nan_to_num(a, nan=0.0) * w[n])
    total = torch.stack(per, dim=-1).sum(dim=-1) if per else torch.zeros(comps.shape[:-1], dtype=comps.dtype)
    flat = total[valid]
    if flat.numel() == 0:
        return _finish(torch.zeros_like(total), valid)
    b_mean = flat.mean()
    b_std = flat.std() if flat.numel() >= 2 else torch.zeros((), dtype=flat.dtype)
    # b_mean is 0 but for rounding (each component's normalised values sum to 0 in every group): a total
    # of exactly 0 (a group in which no weighted component varies) stays 0, not ~1e-16, which would
    # still cost a forward/backward as a non-zero advantage (as group_mean_std keeps flat groups flat)
    values = torch.where(total == 0, torch.zeros_like(total), (total - b_mean) / (b_std + eps))
    return _finish(values, valid)


def mc_grpo_advantages(
    rewards: torch.Tensor, *, mad_scaling: bool = False, mad_floor: float = 0.1
) -> Advantages:
    """MC-GRPO: ``r − median`` over the G+1 valid members; the pivot member is dropped from the loss.

    The median is the lower median of the valid rewards (``torch.median`` semantics), so it is one of
    them; the first member equal to it is the pivot. With ``mad_scaling`` the advantages are divided by
    ``max(MAD, 0.5·std, mad_floor)``, ``MAD = median |r − median|`` (binary rewards make MAD 0 often,
    hence the floors).
    """
    values = torch.zeros_like(rewards)
    mask = torch.zeros(rewards.shape, dtype=torch.bool)
    _, std, _ = group_mean_std(rewards)
    for b in range(rewards.shape[0]):
        row = rewards[b]
        idx = (~torch.isnan(row)).nonzero().flatten()
        if idx.numel() == 0:
            continue
        r = row[idx]
        med = r.median()
        adv = r - med
        if mad_scaling:
            mad = (r - med).abs().median()
            adv = adv / max(float(mad), 0.5 * float(std[b, 0]), mad_floor)
        pivot = int(idx[(r == med).nonzero().flatten()[0]])
        values[b, idx] = adv
        mask[b, idx] = True
        values[b, pivot] = 0.0
        mask[b, pivot] = False
    return Advantages(values=values, mask=mask)


def _process_mask(steps: Sequence[Sequence[StepScores]], outcome: torch.Tensor) -> torch.Tensor:
    """``[B, G]`` bool: valid members (outcome not NaN) with step scores to read."""
    have = torch.tensor([[s is not None for s in group] for group in steps], dtype=torch.bool)
    return have.reshape(outcome.shape) & ~torch.isnan(outcome)


def _returns(length: int, placed: Sequence[tuple[int, float]]) -> torch.Tensor:
    """``[length]``: at each token the sum of the rewards placed at or after it (γ = 1)."""
    rewards = torch.zeros(length, dtype=torch.float64)
    for t, r in placed:
        rewards[min(max(t, 0), length - 1)] += r
    return rewards.flip(0).cumsum(0).flip(0)


def _finish_tokens(tokens: list[list[torch.Tensor]], mask: torch.Tensor) -> Advantages:
    for b, row in enumerate(tokens):
        for g, a in enumerate(row):
            if not bool(mask[b, g]):
                row[g] = torch.zeros_like(a)
    first = [[float(a[0]) if a.numel() else 0.0 for a in row] for row in tokens]
    return Advantages(
        values=torch.tensor(first, dtype=torch.float64).reshape(mask.shape), mask=mask, tokens=tokens
    )


def _leave_one_out(values: torch.Tensor, g: int, others: Sequence[int]) -> float:
    """``values[g]`` minus the mean of ``values`` over ``others`` (RLOO's baseline; ``others`` not empty)."""
    return float(values[g]) - math.fsum(float(values[j]) for j in others) / len(others)


def pure_min_advantages(
    steps: Sequence[Sequence[StepScores]],
    outcome: torch.Tensor,
    lengths: Sequence[Sequence[int]],
    *,
    temperature: float = 0.1,
    outcome_coef: float = 1.0,
) -> Advantages:
    """PURE's min-form credit per token (see the module docstring).

    Args:
        steps: per group, per member, its step *rewards* ``r_k`` (:data:`StepScores`, the value already
            a reward: PURE's ``2 s_k − 1`` of a two-class PRM's score, made by the caller, or an implicit
            PRM's process reward as it is).
        outcome: ``[B, G]`` the outcome reward (the item's score), NaN where invalid.
        lengths: per group, per member, its completion's token count ``|y|``.
        temperature: ``T`` of the soft-min weights.
        outcome_coef: ``c``, the outcome reward's weight.
    """
    mask = _process_mask(steps, outcome)
    tokens: list[list[torch.Tensor]] = []
    for b, group in enumerate(steps):
        placed: list[list[tuple[int, float]]] = []
        for s in group:
            if not s:
                placed.append([])
                continue
            r = torch.tensor([x for _, x in s], dtype=torch.float64)
            w = torch.softmax(-r / temperature, dim=0)
            placed.append([(t, float(x)) for (t, _), x in zip(s, (w * r).tolist(), strict=True)])
        valid = [g for g in range(len(group)) if bool(mask[b, g])]
        total = {g: math.fsum(x for _, x in placed[g]) for g in valid}

        def pooled(others: Sequence[int], b: int = b, total: dict[int, float] = total) -> float:
            # the others' step rewards over the others' tokens, pooled
            tokens_of_others = sum(lengths[b][j] for j in others)
            return math.fsum(total[j] for j in others) / tokens_of_others if tokens_of_others else 0.0

        row, _ = _loo_returns(placed, lengths[b], valid, outcome[b], outcome_coef, pooled)
        tokens.append(row)
    return _finish_tokens(tokens, mask)


def _loo_returns(
    placed: Sequence[Sequence[tuple[int, float]]],
    lengths: Sequence[int],
    valid: Sequence[int],
    outcome: torch.Tensor,
    outcome_coef: float,
    baseline: Callable[[Sequence[int]], float],
) -> tuple[list[torch.Tensor], list[int]]:
    """One group's token returns with leave-one-out baselines (PURE's and PRIME's shared form): member
    ``g``'s step rewards ``placed[g]`` plus ``outcome_coef`` times its outcome minus the mean of the
    others' on its last token, returns with γ = 1, less ``baseline(others)`` (a per-token process
    baseline) on each token still to come. A member that is invalid, alone among the valid ones, or
    without tokens gets zeros. Also returns the members that were compared with others."""
    row: list[torch.Tensor] = []
    compared: list[int] = []
    for g, n in enumerate(lengths):
        others = [j for j in valid if j != g]
        if g not in valid or not others or n == 0:
            row.append(torch.zeros(n, dtype=torch.float64))
            continue
        compared.append(g)
        out = outcome_coef * _leave_one_out(outcome, g, others)
        returns = _returns(n, [*placed[g], (n - 1, out)])
        row.append(returns - baseline(others) * torch.arange(n, 0, -1, dtype=torch.float64))
    return row, compared


def grpo_process_advantages(
    steps: Sequence[Sequence[StepScores]],
    outcome: torch.Tensor,
    lengths: Sequence[Sequence[int]],
    eps: float = 1e-4,
) -> Advantages:
    """DeepSeekMath's process-supervised GRPO per token (see the module docstring). ``outcome`` (``[B,
    G]``, NaN where invalid) only says which members are valid: this form has no outcome reward."""
    mask = _process_mask(steps, outcome)
    tokens: list[list[torch.Tensor]] = []
    for b, group in enumerate(steps):
        scores = [score for g, s in enumerate(group) if bool(mask[b, g]) for _, score in s or ()]
        if scores:
            mean, std, _ = group_mean_std(torch.tensor([scores], dtype=torch.float64))
            m, d = float(mean), float(std) + eps
        row = []
        for g, s in enumerate(group):
            n = lengths[b][g]
            if not bool(mask[b, g]) or not s or n == 0:
                row.append(torch.zeros(n, dtype=torch.float64))
                continue
            row.append(_returns(n, [(t, (score - m) / d) for t, score in s]))
        tokens.append(row)
    return _finish_tokens(tokens, mask)


def prime_advantages(
    steps: Sequence[Sequence[StepScores]],
    outcome: torch.Tensor,
    lengths: Sequence[Sequence[int]],
    *,
    outcome_coef: float = 1.0,
    norm: str = "batch_norm",
    whiten_over: torch.Tensor | None = None,
) -> Advantages:
    """PRIME's credit per token (see the module docstring), after its reference code.

    Args:
        steps: per group, per member, its process rewards on the tokens ending their steps
            (:data:`StepScores`: an implicit PRM's ``process_reward``, as it is).
        outcome: ``[B, G]`` the outcome reward (the item's score), NaN where invalid.
        lengths: per group, per member, its completion's token count ``|y|``.
        outcome_coef: ``c``, the outcome term's weight against the process rewards' 1.
        norm: ``batch_norm`` (PRIME's ``prime_norm``) or ``none``.
        whiten_over: ``[B, G]`` bool, the members whose tokens the whitening statistics are taken over
            (default every member in the mask): those left in the loss (the trainer leaves truncated
            completions out with ``mask_truncated``), as PRIME whitens over the tokens it trains on.

    What was read and matched (``PRIME-RL/PRIME @ 18ad596``, ``training/``):

    * ``verl/trainer/ppo/core_algos.py::compute_rloo_returns``: one RLOO per reward source, the
      verifier's ``gt_scores`` on the last response token and the PRM's ``rm_scores`` on every response
      token, returns with ``verifier_gamma`` / ``reward_model_gamma`` (1.0 in ``run_prime_main.sh``),
      summed, then ``verl_F.masked_whiten(returns, eos_mask)`` (``utils/torch_functional.py``): the mean
      and the Bessel-corrected variance over every response token of the batch (``eos_mask`` is the
      response's attention mask, its EOS included: here the completion's ``|y|`` tokens, EOS included),
      ``(x − mean) · rsqrt(var + 1e-8)``. Matched, over the members in the loss.
    * Its process baseline is computed per token as ``r_t · K/(K−1) − Σ_{all j} m_j/(K−1)`` (``m_j =
      R_j / |y_j|``, the mean over the response tokens): at ``t = 0`` the paper's leave-one-out return
      (``Σ_t (r_t − m_i) = 0``), but at ``t > 0`` it adds ``(Σ_{s≥t} r_s − (|y_i|−t) m_i) / (K−1)``, the
      member's own rewards in its own baseline. Followed instead: the paper's advantage (the averaged
      process rewards of the others as the baseline of each token, ``r_t − 1/(K−1) Σ_{j≠i} m_j``, as in
      algorithms.md §1.8). The outcome term is the same in both.
    * ``verl/workers/actor/dp_prime.py::update_policy``, ``prime_norm: batch_norm`` (the default of
      ``verl/trainer/config/ppo_trainer.yaml``): the token scores divided by ``max |reverse cumsum| +
      1e-6`` over the scores it computed (each data-parallel worker's shard; here the step's batch).
      ``compute_implicit_reward``'s scores are ``log π_φ − log π_ref`` summed per step, without β: the
      batch norm divides any common scale away, so the service's ``β`` only matters with ``norm: none``.
    * ``verl/trainer/main_ppo.py``'s reward manager: ``rm_coef`` (5) and ``verifier.reward_coef`` (5)
      weight the sources in ``token_level_scores``, which the rloo path does not read: it reads the
      unweighted ``gt_scores`` and ``rm_scores``, so the recipe's outcome weight is 1 (``c``).

    ``K`` is the group's valid members (the code's fixed ``n_samples`` knows no invalid one); a member
    whose group has no other valid member gets 0 and is left out of the whitening statistics.
    """
    mask = _process_mask(steps, outcome)
    placed = [
        [list(s or ()) if bool(mask[b, g]) else [] for g, s in enumerate(group)]
        for b, group in enumerate(steps)
    ]
    if norm == "batch_norm":
        placed = _batch_norm(placed, lengths)
    elif norm != "none":
        raise ValueError(f"unknown process reward norm {norm!r} (batch_norm, none)")
    compared = torch.zeros(mask.shape, dtype=torch.bool)
    tokens: list[list[torch.Tensor]] = []
    for b, group in enumerate(placed):
        valid = [g for g in range(len(group)) if bool(mask[b, g])]
        # m_j: member j's process reward per token, the mean over its response tokens
        rate = {g: math.fsum(r for _, r in group[g]) / lengths[b][g] if lengths[b][g] else 0.0 for g in valid}

        def averaged(others: Sequence[int], rate: dict[int, float] = rate) -> float:
            return math.fsum(rate[j] for j in others) / len(others)

        row, scored = _loo_returns(group, lengths[b], valid, outcome[b], outcome_coef, averaged)
        compared[b, scored] = True
        tokens.append(row)
    _whiten(tokens, compared if whiten_over is None else compared & whiten_over)
    return _finish_tokens(tokens, mask)


def _batch_norm(
    placed: list[list[list[tuple[int, float]]]], lengths: Sequence[Sequence[int]]
) -> list[list[list[tuple[int, float]]]]:
    """PRIME's ``batch_norm``: every reward divided by the largest ``|return|`` (γ = 1, no baseline) at any
    token of any member of the batch, + 1e-6."""
    scale = max(
        (
            float(_returns(lengths[b][g], s).abs().max())
            for b, row in enumerate(placed)
            for g, s in enumerate(row)
            if s
        ),
        default=0.0,
    )
    return [[[(t, r / (scale + 1e-6)) for t, r in s] for s in row] for row in placed]


def _whiten(tokens: list[list[torch.Tensor]], over: torch.Tensor) -> None:
    """verl's ``masked_whiten`` in place: ``(x − mean) / sqrt(var + 1e-8)`` for the members ``over``
    (``[B, G]`` bool), the mean and sample (Bessel) variance over all their tokens together."""
    picked = [(b, g) for b, g in over.nonzero().tolist() if tokens[b][g].numel()]
    if not picked:
        return
    flat = torch.cat([tokens[b][g] for b, g in picked])
    mean = flat.mean()
    var = flat.var() if flat.numel() >= 2 else torch.zeros((), dtype=flat.dtype)
    for b, g in picked:
        tokens[b][g] = (tokens[b][g] - mean) * torch.rsqrt(var + 1e-8)


def zero_variance_groups(rewards: torch.Tensor) -> torch.Tensor:
    """``[B]`` bool: groups with no learning signal (fewer than two valid members, or all equal).

    DAPO's dynamic sampling drops these and samples more prompts instead. ``rewards`` is ``[B, G]``, or
    ``[B, G, K]`` reward components (GDPO, which normalises each component on its own): then a group has
    no signal only when *none* of its components varies; equal totals of different components are not
    "all equal".
    """
    if rewards.dim() == 3:
        b, g, k = rewards.shape
        per_component = zero_variance_groups(rewards.transpose(1, 2).reshape(b * k, g))
        return per_component.reshape(b, k).all(dim=-1)
    valid = ~torch.isnan(rewards)
    count = valid.sum(dim=-1)
    hi = torch.where(valid, rewards, torch.full_like(rewards, -torch.inf)).amax(dim=-1)
    lo = torch.where(valid, rewards, torch.full_like(rewards, torch.inf)).amin(dim=-1)
    return (count < 2) | (hi == lo)


def overlong_penalty(
    lengths: torch.Tensor, max_length: int, cache_length: int, factor: float = 1.0
) -> torch.Tensor:
    """DAPO soft overlong punishment, added to the reward::

        R_len(y) = 0                                   if |y| <= L_max − L_cache
                 = ((L_max − L_cache) − |y|) / L_cache  if L_max − L_cache < |y| <= L_max
                 = −1                                   if |y| > L_max

    times ``factor``. ``lengths`` are completion lengths in tokens.
    """
    lengths = lengths.to(torch.float64)
    start = max_length - cache_length
    ramp = (start - lengths) / cache_length
    pen = torch.where(lengths <= start, torch.zeros_like(lengths), ramp)
    pen = torch.where(lengths > max_length, torch.full_like(lengths, -1.0), pen)
    return pen * factor


def component_matrix(
    results: Sequence[Sequence[Mapping[str, float | None]]], names: Sequence[str]
) -> torch.Tensor:
    """``[B, G, K]`` from per-item component dicts (None or absent → NaN)."""
    return torch.tensor(
        [
            [[float("nan") if c.get(n) is None else float(c[n]) for n in names] for c in group]  # type: ignore[arg-type]
            for group in results
        ],
        dtype=torch.float64,
    )
