"""The trainer's own advantages and loss on a hand-made batch, against the formulas worked out by hand
(algorithms.md §4.1-4.3, §4.8; advantages.py and losses.py): the estimator the config picks, DAPO's
overlong shaping added to the reward, invalid members masked out of the statistics *and* of the loss
normalisers, a zero-variance group kept in them, a completion of length 0, micro-batching.

With ``old_logprobs: recompute`` and one epoch the ratio is exactly 1 (the denominator is the policy's
own first forward), so every token's loss is ``−A_i`` and the batch loss is a closed form of the
advantages, the completion lengths and the normalisers (a random tiny model; its logprobs cancel).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch

from rewardhub_client import ItemResult
from rewardhub_trainer.config import TrainConfig
from rewardhub_trainer.data import Problem
from rewardhub_trainer.generation import Completion
from rewardhub_trainer.rewards import Group
from rewardhub_trainer.trainer import Trainer

os.environ.setdefault("HF_HUB_OFFLINE", "1")

EPS = 1e-4
L_MAX = 4  # generation.max_new_tokens


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tiny_models import build_tiny_causal_lm

    return build_tiny_causal_lm(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture
def make_trainer(tiny_model_dir: Path, tmp_path: Path) -> Callable[..., Trainer]:
    def factory(micro_batch_size: int = 8, **algorithm: Any) -> Trainer:
        cfg = TrainConfig.model_validate(
            {
                "model": {"path": str(tiny_model_dir), "device": "cpu", "torch_threads": 1},
                "data": {"use_chat_template": False, "prompt_template": "{question}"},
                "generation": {"group_size": 4, "max_new_tokens": L_MAX},
                "algorithm": {"old_logprobs": "recompute", "num_epochs": 1, **algorithm},
                "training": {"prompts_per_step": 2, "micro_batch_size": micro_batch_size},
                "output": {"run_dir": str(tmp_path / "run"), "progress": False, "tensorboard": False},
            }
        )
        return Trainer(cfg)

    return factory


def make_group(index: int, scores: Sequence[float | None], lengths: Sequence[int]) -> Group:
    """A scored group: ``None`` is an item the service answered ``valid: false``."""
    comps = [Completion([1, 2], [5 + t for t in range(n)], [-1.0] * n, "x" * n, n == L_MAX) for n in lengths]
    results = [
        ItemResult(id=str(k), reward="r", score=s, valid=s is not None, reason=None if s is not None else "x")
        for k, s in enumerate(scores)
    ]
    return Group(f"g{index}", Problem(index, f"q{index}", "1"), comps, results)


def batch() -> list[Group]:
    # group 0: one invalid member (masked, never 0), the valid ones of lengths 3, 1 and 0 (an empty
    # completion); group 1: every reward equal (advantage exactly 0, in the normalisers)
    return [make_group(0, [1.0, None, 0.0, 0.0], [3, 2, 1, 0]), make_group(1, [1.0] * 4, [2] * 4)]


# group 0's valid rewards [1, 0, 0]: mean 1/3, sample std √(1/3)
S = math.sqrt(1 / 3) + EPS
A0 = [(2 / 3) / S, 0.0, (-1 / 3) / S, (-1 / 3) / S]
N = 3 + 4  # sequences in the loss: the invalid one is not
TOKENS = (3 + 1 + 0) + 4 * 2  # their tokens: the invalid one's 2 are not


def test_grpo_advantages_mask_the_invalid_member_and_leave_the_flat_group_at_exact_zero(
    make_trainer: Callable[..., Trainer],
) -> None:
    adv, rewards = make_trainer()._advantages(batch())
    assert torch.allclose(adv.values, torch.tensor([A0, [0.0] * 4], dtype=torch.float64), atol=1e-12)
    assert adv.values[1].abs().max().item() == 0.0 and not torch.isnan(adv.values).any()
    assert adv.mask.tolist() == [[True, False, True, True], [True] * 4]
    assert math.isnan(rewards[0, 1].item())


@pytest.mark.parametrize("micro_batch_size", [8, 1])
@pytest.mark.parametrize(
    ("loss_agg", "expected"),
    [
        # (1/N) Σ_i mean_t(−A_i): the empty completion's mean is 0 (0/max(0,1)) but it counts in N
        ("seq_mean_token_mean", -((2 / 3) / S + (-1 / 3) / S + 0.0) / N),
        # Σ_{i,t} −A_i / Σ|o_i| = −(3·A_0 + 1·A_2 + 0·A_3) / 12 = −(5/3)/S / 12
        ("token_mean", -(3 * (2 / 3) / S + 1 * (-1 / 3) / S) / TOKENS),
        # Σ_{i,t} −A_i / (N · L_max)
        ("seq_mean_token_sum_norm", -(3 * (2 / 3) / S + 1 * (-1 / 3) / S) / (N * L_MAX)),
    ],
)
def test_the_batch_loss_is_the_formula_with_its_normalisers(
    make_trainer: Callable[..., Trainer], loss_agg: str, expected: float, micro_batch_size: int
) -> None:
    trainer = make_trainer(micro_batch_size, loss_agg=loss_agg)
    groups = batch()
    adv, _ = trainer._advantages(groups)
    stats = trainer._optimize(groups, adv)
    assert stats["seqs_in_loss"] == N
    assert stats["seqs_forwarded"] == 3  # the flat group's zero advantages are skipped (KL off)
    assert stats["ratio_mean"] == pytest.approx(1.0)
    assert stats["loss"] == pytest.approx(expected, rel=1e-5)
    assert math.isfinite(stats["grad_norm"]) and stats["grad_norm"] > 0


@pytest.mark.parametrize(
    ("micro_batch_size", "expected"),
    [
        # one micro-batch holds every sequence in the loss: token_mean's Σ −A_i / Σ|o_i| (12 tokens)
        (8, -(3 * (2 / 3) / S + 1 * (-1 / 3) / S) / TOKENS),
        # seven micro-batches of one sequence: the mean of their token means (−A_0, −A_2, the empty
        # completion's 0 and the flat group's four 0s) over 7
        (1, -((2 / 3) / S + (-1 / 3) / S) / N),
        # [A_0 ×3, A_2 ×1] (4 tokens), [empty, flat] (2), [flat, flat] (4), [flat] (2): 4 micro-batches,
        # only the first non-zero; the flat group's sequences, skipped by the forward (KL off), still make
        # up the micro-batches TRL would form
        (2, -(3 * (2 / 3) / S + 1 * (-1 / 3) / S) / 4 / 4),
    ],
)
def test_bnpo_averages_the_token_means_of_the_micro_batches(
    make_trainer: Callable[..., Trainer], micro_batch_size: int, expected: float
) -> None:
    """TRL's ``bnpo``: each micro-batch's loss is its own tokens' mean, and the micro-batches are
    averaged (as gradient accumulation over them averages), so a micro-batch of short completions
    weighs as much as one of long ones (algorithms.md §4.8)."""
    trainer = make_trainer(micro_batch_size, loss_agg="bnpo")
    groups = batch()
    adv, _ = trainer._advantages(groups)
    stats = trainer._optimize(groups, adv)
    assert stats["loss"] == pytest.approx(expected, rel=1e-5)
    assert math.isfinite(stats["grad_norm"]) and stats["grad_norm"] > 0


def test_with_the_kl_on_every_valid_sequence_runs_and_the_kl_starts_at_zero(
    make_trainer: Callable[..., Trainer],
) -> None:
    """β > 0: the zero-advantage sequences run too (they feel the KL); the reference is the policy as
    loaded, so before the first update Δ = 0, k3 = 0 and the loss is the policy term alone."""
    trainer = make_trainer(kl_coef=0.1, kl_estimator="k3", loss_agg="token_mean")
    groups = batch()
    adv, _ = trainer._advantages(groups)
    stats = trainer._optimize(groups, adv)
    assert stats["seqs_forwarded"] == N
    assert stats["kl"] == pytest.approx(0.0, abs=1e-6)
    assert stats["loss"] == pytest.approx(-(3 * (2 / 3) / S + 1 * (-1 / 3) / S) / TOKENS, rel=1e-5)


def test_a_batch_whose_every_token_is_masked_trains_on_nothing(make_trainer: Callable[..., Trainer]) -> None:
    """Every member invalid: nothing is in the loss, no forward, no optimizer step, no NaN anywhere."""
    trainer = make_trainer()
    groups = [make_group(0, [None] * 4, [1, 2, 3, 4]), make_group(1, [None] * 4, [2] * 4)]
    adv, _ = trainer._advantages(groups)
    assert not adv.mask.any() and adv.values.abs().max().item() == 0.0
    before = [p.detach().clone() for p in trainer.model.parameters()]
    stats = trainer._optimize(groups, adv)
    assert stats == {"seqs_in_loss": 0.0, "seqs_forwarded": 0.0}
    assert trainer.updates == 0
    assert all(torch.equal(a, b) for a, b in zip(before, trainer.model.parameters(), strict=True))


def test_dapo_adds_the_overlong_shaping_before_normalising(make_trainer: Callable[..., Trainer]) -> None:
    """algorithms.md §4.3 with L_max 4, L_cache 2: lengths [1, 3, 4, 2] shape [0, −0.5, −1, 0]; the
    invalid member stays NaN (masked) whatever its length."""
    trainer = make_trainer(estimator="dapo", overlong={"cache_length": 2})
    groups = [
        make_group(0, [1.0, 1.0, 0.0, None], [1, 3, 4, 2]),
        make_group(1, [1.0] * 4, [1, 2, 1, 2]),  # no length on the ramp: flat, exactly 0
    ]
    adv, rewards = trainer._advantages(groups)
    shaped = [1.0, 0.5, -1.0]  # mean 1/6; deviations 5/6, 1/3, −7/6: Σ² = 78/36, /2 → std √39/6
    assert rewards[0, :3].tolist() == pytest.approx(shaped)
    s = math.sqrt(39) / 6 + EPS
    expected = [[(x - 1 / 6) / s for x in shaped] + [0.0], [0.0] * 4]
    assert torch.allclose(adv.values, torch.tensor(expected, dtype=torch.float64), atol=1e-12)
    assert adv.mask.tolist() == [[True, True, True, False], [True] * 4]
    # DAPO's aggregation and clip-higher
    assert trainer.config.algorithm.resolved_loss_agg == "token_mean"
    assert trainer.config.algorithm.resolved_clip_high == 0.28


def test_mask_truncated_takes_the_truncated_out_of_the_loss_but_not_of_the_group_statistics(
    make_trainer: Callable[..., Trainer],
) -> None:
    """TRL's mask_truncated_completions: the statistics are over every valid member, the truncated one
    (length L_max, no EOS) is then left out of the loss and of its normalisers."""
    trainer = make_trainer(mask_truncated=True, estimator="dr_grpo")
    groups = [make_group(0, [1.0, 0.0, 0.0, 0.0], [L_MAX, 1, 2, 3]), make_group(1, [0.0] * 4, [1] * 4)]
    adv, _ = trainer._advantages(groups)
    # Dr. GRPO: r − mean over all four (mean 1/4); the truncated member's 0.75 is then masked
    assert adv.values[0].tolist() == pytest.approx([0.0, -0.25, -0.25, -0.25])
    assert adv.mask.tolist() == [[False, True, True, True], [True] * 4]
    stats = trainer._optimize(groups, adv)
    # Σ_{i,t} −A_i / (N · L_max), N = 3 + 4 = 7: −(−0.25)·(1 + 2 + 3) / 28
    assert stats["loss"] == pytest.approx(0.25 * 6 / (7 * L_MAX), rel=1e-5)


# ---- ratios away from 1 and a live KL: the whole per-token formula of §4.8 inside the trainer ----

# generation.temperature: the policy's, the reference's and the sampler's logprobs are all tempered
T_SAMPLE = 0.7
PROMPT = [1, 2]
# group 0: rewards [1, 0, 0, invalid]; per completion its tokens and the ratio ρ = π_θ/π_old wanted on each
TOKENS_OF = [[5, 6, 7], [8, 9], [10, 11], [12, 13]]
RHO = [
    # A > 0: clipped at 1 + ε_high = 1.28; inside clip-higher (ε_low = 0.2 would clip it); the min is ρ
    [1.5, 1.25, 0.5],
    [0.5, 1.5],  # A < 0: clipped at 1 − ε_low = 0.8; unclipped (−min(ρA, 1.28A) = 1.5|A|)
    [0.9, 1.1],  # A < 0: inside the clip range
    [9.0, 0.1],  # the invalid member: neither its ratios nor its tokens reach the loss
]
EPS_LOW, EPS_HIGH, BETA = 0.2, 0.28, 0.1


def _tempered_logprobs(model: torch.nn.Module, completion: list[int]) -> list[float]:
    """log softmax(z/T)[y_t] of one unpadded sequence, by a plain forward (not the trainer's batching)."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([PROMPT + completion])).logits[0].float() / T_SAMPLE
    lp = torch.log_softmax(logits, dim=-1)
    return [lp[len(PROMPT) - 1 + t, tok].item() for t, tok in enumerate(completion)]


def _ratio_trainer(tiny_model_dir: Path, tmp_path: Path, **algorithm: Any) -> Trainer:
    """One group of four at ``T_SAMPLE``, its ratios to the *sampler's* logprobs (old_logprobs: sampler)."""
    cfg = TrainConfig.model_validate(
        {
            "model": {"path": str(tiny_model_dir), "device": "cpu", "torch_threads": 1},
            "data": {"use_chat_template": False, "prompt_template": "{question}"},
            "generation": {"group_size": 4, "max_new_tokens": L_MAX, "temperature": T_SAMPLE},
            "algorithm": {"old_logprobs": "sampler", **algorithm},
            "training": {"prompts_per_step": 1, "micro_batch_size": 2},
            "output": {"run_dir": str(tmp_path / "run"), "progress": False, "tensorboard": False},
        }
    )
    return Trainer(cfg)


def _sampled_with_ratios(trainer: Trainer) -> tuple[list[Group], list[list[float]]]:
    """The group of ``TOKENS_OF`` (rewards 1, 0, 0, invalid) whose sampler logprobs put ``RHO`` on each
    token under the trainer's policy as it is now; with the policy's logprobs."""
    policy = [_tempered_logprobs(trainer.model, c) for c in TOKENS_OF]
    comps = [
        Completion(PROMPT, c, [lp - math.log(r) for lp, r in zip(lps, rhos, strict=True)], "x", False)
        for c, lps, rhos in zip(TOKENS_OF, policy, RHO, strict=True)
    ]
    results = [
        ItemResult(id=str(k), reward="r", score=s, valid=s is not None, reason=None if s is not None else "x")
        for k, s in enumerate([1.0, 0.0, 0.0, None])
    ]
    return [Group("g0", Problem(0, "q0", "1"), comps, results)], policy


@pytest.mark.parametrize("kl_estimator", ["k1", "k2", "k3"])
def test_the_loss_with_clip_higher_ratios_and_the_kl_is_the_formula_token_by_token(
    tiny_model_dir: Path, tmp_path: Path, kl_estimator: str
) -> None:
    """ℓ_{i,t} = −min(ρA_i, clip(ρ, 1−ε_low, 1+ε_high)A_i) + β·KL_{i,t} (algorithms.md §4.1, §4.3, §4.7,
    §4.8), token_mean, with the ratio to the *sampler's* logprobs (old_logprobs: sampler) set per token
    away from 1 on both sides of both clip bounds, and a policy moved away from its frozen reference so
    that Δ = log π_θ − log π_ref is not 0. The other by-hand tests have ρ = 1 and Δ = 0, where neither
    the clip bounds passed to the loss, nor the sampler's logprobs, nor the sign, estimator or direction
    of the KL term changes a number."""
    trainer = _ratio_trainer(
        tiny_model_dir,
        tmp_path,
        clip_eps_low=EPS_LOW,
        clip_eps_high=EPS_HIGH,
        kl_coef=BETA,
        kl_estimator=kl_estimator,
        loss_agg="token_mean",
    )
    assert trainer.reference is not None
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():  # the policy leaves its reference (the checkpoint as loaded)
        for p in trainer.model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=gen))
    groups, policy = _sampled_with_ratios(trainer)
    ref = [_tempered_logprobs(trainer.reference, c) for c in TOKENS_OF]
    adv, _ = trainer._advantages(groups)
    a = [x / S for x in (2 / 3, -1 / 3, -1 / 3)]  # valid [1, 0, 0]: mean 1/3, sample std √(1/3)
    assert adv.values[0, :3].tolist() == pytest.approx(a, rel=1e-12)

    def kl(d: float) -> float:  # Schulman's estimators of KL(π_θ ‖ π_ref), Δ = log π_θ − log π_ref
        return {"k1": d, "k2": 0.5 * d * d, "k3": math.exp(-d) + d - 1}[kl_estimator]

    policy_terms, kl_terms, clipped = [], [], 0
    for i in range(3):
        for t, rho in enumerate(RHO[i]):
            bounded = min(max(rho, 1 - EPS_LOW), 1 + EPS_HIGH)
            policy_terms.append(-min(rho * a[i], bounded * a[i]))
            clipped += bounded * a[i] < rho * a[i]
            kl_terms.append(kl(policy[i][t] - ref[i][t]))
    n_tok = len(policy_terms)  # 7: the invalid member's 2 tokens are not in the loss
    # the KL term moves the loss by more than the tolerance, or the test could not see it
    assert abs(BETA * sum(kl_terms) / n_tok) > 1e-3
    stats = trainer._optimize(groups, adv)
    assert stats["seqs_in_loss"] == 3 and stats["seqs_forwarded"] == 3
    assert stats["loss"] == pytest.approx((sum(policy_terms) + BETA * sum(kl_terms)) / n_tok, rel=1e-4)
    assert stats["kl"] == pytest.approx(sum(kl_terms) / n_tok, rel=1e-4)
    assert stats["ratio_mean"] == pytest.approx(sum(sum(r) for r in RHO[:3]) / n_tok, rel=1e-4)
    assert clipped == 2 and stats["clip_frac"] == pytest.approx(clipped / n_tok)


def test_gspo_in_the_trainer_takes_each_completion_s_geometric_mean_ratio_and_clips_it_whole(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """``importance_sampling_level: sequence``, clip bounds left unset (GSPO's 3e-4 / 4e-4): the same
    sampler ratios as above give s_i = (Π_t ρ_t)^(1/|y_i|), 0.979, 0.866 and 0.995; the first (A > 0,
    under 1 − 3e-4) is not clipped, the other two (A < 0, under 1 − 3e-4) are, every token of them.
    The loss is GSPO's mean over the 3 completions (seq_mean_token_mean, which auto picks at sequence
    level), the metrics are per token."""
    trainer = _ratio_trainer(tiny_model_dir, tmp_path, importance_sampling_level="sequence")
    groups, _ = _sampled_with_ratios(trainer)
    adv, _ = trainer._advantages(groups)
    a = [x / S for x in (2 / 3, -1 / 3, -1 / 3)]
    s = [math.exp(sum(math.log(r) for r in rho) / len(rho)) for rho in RHO[:3]]
    lo, hi = 1 - 3e-4, 1 + 4e-4
    terms = [-min(si * ai, min(max(si, lo), hi) * ai) for si, ai in zip(s, a, strict=True)]
    clipped = [min(max(si, lo), hi) * ai < si * ai for si, ai in zip(s, a, strict=True)]
    assert clipped == [False, True, True]
    n_tok = sum(len(r) for r in RHO[:3])  # 7
    stats = trainer._optimize(groups, adv)
    assert stats["loss"] == pytest.approx(sum(terms) / 3, rel=1e-4)
    # a clipped completion counts once per token; its ratio s_i once per token
    assert stats["clip_frac"] == pytest.approx(
        sum(len(r) for r, c in zip(RHO[:3], clipped, strict=True) if c) / n_tok
    )
    assert stats["ratio_mean"] == pytest.approx(
        sum(len(r) * si for r, si in zip(RHO[:3], s, strict=True)) / n_tok, rel=1e-4
    )
    assert math.isnan(stats["dual_clip_frac"]) and stats["grad_norm"] > 0


def test_dual_clip_in_the_trainer_bounds_the_loss_of_negative_advantage_tokens(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """``dual_clip_c: 1.4`` on the same sampler ratios: the A < 0 token at ρ = 1.5 (PPO-clip's 1.5|A|,
    its unclipped branch) is bounded at 1.4|A|; the A > 0 tokens at 1.5 and 1.25 and the others are
    PPO-clip's as before."""
    c = 1.4
    trainer = _ratio_trainer(
        tiny_model_dir,
        tmp_path,
        clip_eps_low=EPS_LOW,
        clip_eps_high=EPS_HIGH,
        dual_clip_c=c,
        loss_agg="token_mean",
    )
    groups, _ = _sampled_with_ratios(trainer)
    adv, _ = trainer._advantages(groups)
    a = [x / S for x in (2 / 3, -1 / 3, -1 / 3)]
    terms, dual = [], 0
    for i in range(3):
        for rho in RHO[i]:
            ppo = -min(rho * a[i], min(max(rho, 1 - EPS_LOW), 1 + EPS_HIGH) * a[i])
            bounded = min(ppo, -c * a[i]) if a[i] < 0 else ppo
            terms.append(bounded)
            dual += bounded < ppo
    assert dual == 1
    stats = trainer._optimize(groups, adv)
    assert stats["loss"] == pytest.approx(sum(terms) / len(terms), rel=1e-4)
    assert stats["dual_clip_frac"] == pytest.approx(dual / len(terms))
    assert stats["clip_frac"] == pytest.approx(2 / len(terms))  # the dual-clipped token is not PPO-clipped


def test_a_second_epoch_takes_its_ratio_to_the_first_epoch_s_policy(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """``num_epochs: 2`` with ``old_logprobs: recompute``: the second epoch's ρ is π_θ after the first
    optimizer step over π_θ as sampled (the first epoch's forward), not over itself (ρ = 1 again, and
    the clip would never act: PPO's trust region gone). The policy after one step is that of an
    identical run of one epoch; its logprobs by a plain forward give the second epoch's ratios and
    loss by hand."""

    def make(epochs: int, run: str) -> Trainer:
        cfg = TrainConfig.model_validate(
            {
                "model": {"path": str(tiny_model_dir), "device": "cpu", "torch_threads": 1},
                "data": {"use_chat_template": False, "prompt_template": "{question}"},
                "generation": {"group_size": 4, "max_new_tokens": L_MAX, "temperature": T_SAMPLE},
                "algorithm": {"old_logprobs": "recompute", "num_epochs": epochs, "loss_agg": "token_mean"},
                "training": {"prompts_per_step": 1, "micro_batch_size": 2, "learning_rate": 1e-3},
                "output": {"run_dir": str(tmp_path / run), "progress": False, "tensorboard": False},
            }
        )
        return Trainer(cfg)

    def batch_of() -> list[Group]:
        comps = [Completion(PROMPT, c, [0.0] * len(c), "x", False) for c in TOKENS_OF]
        results = [
            ItemResult(id=str(k), reward="r", score=s, valid=True) for k, s in enumerate([1.0, 0.0, 0.0, 0.0])
        ]
        return [Group("g0", Problem(0, "q0", "1"), comps, results)]

    one = make(1, "one")
    before = [_tempered_logprobs(one.model, c) for c in TOKENS_OF]
    groups = batch_of()
    one._optimize(groups, one._advantages(groups)[0])
    after = [_tempered_logprobs(one.model, c) for c in TOKENS_OF]

    two = make(2, "two")
    groups = batch_of()
    adv, _ = two._advantages(groups)
    a = adv.values[0].tolist()  # [0.75, −0.25, −0.25, −0.25] / (std + ε), std = 1/2
    assert a == pytest.approx([x / (0.5 + EPS) for x in (0.75, -0.25, -0.25, -0.25)], rel=1e-12)
    stats = two._optimize(groups, adv)
    rho = [math.exp(x - y) for i in range(4) for x, y in zip(after[i], before[i], strict=True)]
    adv_of = [a[i] for i in range(4) for _ in TOKENS_OF[i]]
    assert max(abs(r - 1) for r in rho) > 1e-2  # the step moved the policy: ρ = 1 would be told apart
    terms = [-min(r * x, min(max(r, 0.8), 1.2) * x) for r, x in zip(rho, adv_of, strict=True)]
    clipped = sum(min(max(r, 0.8), 1.2) * x < r * x for r, x in zip(rho, adv_of, strict=True))
    assert 0 < clipped < len(rho)  # both branches of the min are taken
    assert stats["clip_frac"] == pytest.approx(clipped / len(rho))
    assert stats["ratio_mean"] == pytest.approx(sum(rho) / len(rho), rel=1e-4)
    assert stats["loss"] == pytest.approx(sum(terms) / len(terms), rel=1e-3)


def test_left_padded_prompts_of_different_lengths_give_each_sequence_its_own_logprobs(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """One micro-batch of two groups whose prompts differ in length (2 and 5 tokens) and completions of
    different lengths: the loss's forward left-pads the prompts and right-pads the completions, and its
    logprobs must be each sequence's own, as a plain unpadded forward gives them: padding neither
    attended to nor moving the positions, the prompt not in the loss. The sampler's logprobs are those
    plain ones, so the mismatch is 0 and every ratio 1 (up to float noise)."""
    cfg = TrainConfig.model_validate(
        {
            "model": {"path": str(tiny_model_dir), "device": "cpu", "torch_threads": 1},
            "data": {"use_chat_template": False, "prompt_template": "{question}"},
            "generation": {"group_size": 2, "max_new_tokens": L_MAX, "temperature": T_SAMPLE},
            "algorithm": {"old_logprobs": "sampler"},
            "training": {"prompts_per_step": 2, "micro_batch_size": 8},
            "output": {"run_dir": str(tmp_path / "run"), "progress": False, "tensorboard": False},
        }
    )
    trainer = Trainer(cfg)

    def plain(prompt: list[int], completion: list[int]) -> list[float]:
        with torch.no_grad():
            logits = trainer.model(input_ids=torch.tensor([prompt + completion])).logits[0].float()
        lp = torch.log_softmax(logits / T_SAMPLE, dim=-1)
        return [lp[len(prompt) - 1 + t, tok].item() for t, tok in enumerate(completion)]

    groups = []
    for index, (prompt, completions) in enumerate(
        [([1, 2], [[5, 6, 7, 8], [9]]), ([3, 4, 5, 6, 7], [[10, 11], [12, 13, 14]])]
    ):
        comps = [Completion(prompt, c, plain(prompt, c), "x", False) for c in completions]
        results = [ItemResult(id=str(k), reward="r", score=float(k), valid=True) for k in range(2)]
        groups.append(Group(f"g{index}", Problem(index, f"q{index}", "1"), comps, results))
    adv, _ = trainer._advantages(groups)
    stats = trainer._optimize(groups, adv)
    assert stats["seqs_forwarded"] == 4
    assert stats["logprob_mismatch"] < 1e-5
    assert stats["ratio_mean"] == pytest.approx(1.0, abs=1e-5)


def _overflow_at(model: torch.nn.Module, row: int, position: int) -> torch.utils.hooks.RemovableHandle:
    """Make the policy's forward overflow at one token: one unit of the final hidden state of sequence
    ``row`` at ``position`` becomes inf, as an fp16/bf16 activation past its range does (the tiny model
    runs in float32 on CPU, where no real input overflows it deterministically). The logits there are
    then ±inf and that token's log-prob NaN (inf − inf in the log-softmax), and the backward through the
    LM head is NaN (0 · inf), the gradient of a bad forward pass."""

    def hook(module: torch.nn.Module, args: Any, output: torch.Tensor) -> torch.Tensor:
        bad = torch.zeros_like(output)
        bad[row, position, 0] = math.inf
        return output + bad

    return model.model.norm.register_forward_hook(hook)  # type: ignore[union-attr,operator,no-any-return]


@pytest.mark.parametrize("level", ["token", "sequence"])
def test_a_non_finite_logprob_skips_the_optimizer_step_and_is_counted(
    make_trainer: Callable[..., Trainer], level: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A NaN log-prob passed the ratio clamp (``torch.clamp`` keeps NaN, at the token and the GSPO
    sequence level alike) and the optimizer stepped on a NaN gradient: every weight NaN after one bad
    forward pass. Found in review. The step is now skipped (the weights, the optimizer state and the
    ``updates`` count as they were), with a warning, ``nonfinite_tokens`` counting the loss tokens and
    ``updates_skipped`` the step; the next, finite, step trains as usual."""
    trainer = make_trainer(importance_sampling_level=level, loss_agg="seq_mean_token_mean")
    groups = batch()
    adv, _ = trainer._advantages(groups)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    # the first sequence run (group 0's first member, 3 tokens): its second completion token's log-prob
    # is read at the position of its first completion token (after the 2 prompt tokens)
    handle = _overflow_at(trainer.model, row=0, position=2)
    try:
        with caplog.at_level("WARNING", logger="rewardhub_trainer.trainer"):
            stats = trainer._optimize(groups, adv)
    finally:
        handle.remove()
    assert stats["nonfinite_tokens"] == 1.0 and stats["updates_skipped"] == 1.0
    assert all(torch.equal(a, b) for a, b in zip(before, trainer.model.parameters(), strict=True))
    assert trainer.updates == 0 and not trainer.optimizer.state
    assert "optimizer step skipped" in caplog.text and "1 loss token" in caplog.text
    stats = trainer._optimize(groups, adv)
    assert (stats["nonfinite_tokens"], stats["updates_skipped"], trainer.updates) == (0.0, 0.0, 1)
    assert math.isfinite(stats["loss"]) and math.isfinite(stats["grad_norm"]) and stats["grad_norm"] > 0
    assert all(torch.isfinite(p).all() for p in trainer.model.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(before, trainer.model.parameters(), strict=True))


def test_a_non_finite_gradient_with_finite_logprobs_skips_the_step_too(
    make_trainer: Callable[..., Trainer], caplog: pytest.LogCaptureFixture
) -> None:
    """The loss's inputs are finite but the backward overflows (a NaN gradient in one weight, as an
    fp16 backward past its range gives): the gradient norm is not finite, and the step is skipped, as
    verl's actor skips it; no loss token is counted non-finite."""
    trainer = make_trainer()
    groups = batch()
    adv, _ = trainer._advantages(groups)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    weight = trainer.model.model.layers[0].mlp.down_proj.weight  # type: ignore[union-attr,index]
    handle = weight.register_hook(lambda g: g * math.nan)
    try:
        with caplog.at_level("WARNING", logger="rewardhub_trainer.trainer"):
            stats = trainer._optimize(groups, adv)
    finally:
        handle.remove()
    assert (stats["nonfinite_tokens"], stats["updates_skipped"], trainer.updates) == (0.0, 1.0, 0)
    assert math.isnan(stats["grad_norm"]) and "gradient norm" in caplog.text
    assert all(torch.equal(a, b) for a, b in zip(before, trainer.model.parameters(), strict=True))


def test_max_skipped_steps_in_a_row_with_every_update_skipped_end_the_run(
    make_trainer: Callable[..., Trainer],
) -> None:
    """A skipped step costs the weights nothing, but a run whose every step is skipped (a forward that
    overflows on everything, weights loaded NaN) trains on nothing while it looks alive: as for failed and
    invalid steps, ``training.max_skipped_steps`` such steps in a row end it. A step that stepped ends the
    streak; one with nothing in the loss leaves it as it was; the streak is in the checkpoint."""
    trainer = make_trainer()
    trainer.config.training.max_skipped_steps = 2
    groups = batch()
    adv, _ = trainer._advantages(groups)

    def step(overflow: bool) -> dict[str, float]:
        handle = _overflow_at(trainer.model, row=0, position=2) if overflow else None
        try:
            stats = trainer._optimize(groups, adv)
        finally:
            if handle is not None:
                handle.remove()
        trainer._check_skipped(stats)
        return stats

    step(overflow=True)
    assert trainer.skipped_steps == 1
    step(overflow=False)  # stepped: the streak ends
    assert (trainer.skipped_steps, trainer.updates) == (0, 1)
    step(overflow=True)
    trainer._check_skipped({"seqs_in_loss": 0.0, "seqs_forwarded": 0.0})  # nothing to train on
    assert trainer.skipped_steps == 1
    trainer._save()
    resumed = make_trainer()
    resumed.config.training.max_skipped_steps = 2
    resumed._resume()
    assert resumed.skipped_steps == 1
    trainer = resumed
    with pytest.raises(RuntimeError, match=r"2 consecutive steps .*training.max_skipped_steps; 1 non-finite"):
        step(overflow=True)
