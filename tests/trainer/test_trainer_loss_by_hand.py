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
