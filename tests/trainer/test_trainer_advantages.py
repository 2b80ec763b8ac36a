"""Advantage estimators against numbers worked out by hand (see the formulas in advantages.py)."""

from __future__ import annotations

import math

import pytest
import torch

from rewardhub_trainer.advantages import (
    component_matrix,
    dr_grpo_advantages,
    gdpo_advantages,
    group_mean_std,
    grpo_advantages,
    mc_grpo_advantages,
    overlong_penalty,
    rloo_advantages,
    zero_variance_groups,
)

NAN = math.nan
EPS = 1e-4


def t(rows: list[list[float]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float64)


def close(a: torch.Tensor, b: list[list[float]] | list[float]) -> None:
    assert torch.allclose(a.to(torch.float64), torch.tensor(b, dtype=torch.float64), atol=1e-9), (a, b)


def test_group_stats_sample_std_over_valid_members() -> None:
    mean, std, count = group_mean_std(
        t([[1, 0, 1, 0], [1, NAN, 0, 0], [NAN, NAN, NAN, NAN], [NAN, 2, NAN, NAN]])
    )
    close(mean[:, 0], [0.5, 1 / 3, 0.0, 2.0])
    # [1,0,1,0]: Σ(r−m)² = 4·0.25 = 1, /(n−1)=3 → √(1/3); [1,0,0]: (4/9 + 1/9 + 1/9)/2 = 1/3 → √(1/3)
    close(std[:, 0], [math.sqrt(1 / 3), math.sqrt(1 / 3), 0.0, 0.0])
    close(count[:, 0].double(), [4, 3, 0, 1])


def test_grpo_binary_group() -> None:
    adv = grpo_advantages(t([[1, 0, 1, 0]]), EPS)
    a = 0.5 / (math.sqrt(1 / 3) + EPS)  # = 0.86588...
    close(adv.values, [[a, -a, a, -a]])
    assert adv.mask.all()


def test_grpo_masks_invalid_instead_of_zero() -> None:
    adv = grpo_advantages(t([[1, NAN, 0, 0]]), EPS)
    s = math.sqrt(1 / 3) + EPS
    # mean over the 3 valid members is 1/3 (an invalid-as-0 rule would give 1/4)
    close(adv.values, [[(2 / 3) / s, 0.0, (-1 / 3) / s, (-1 / 3) / s]])
    assert adv.mask.tolist() == [[True, False, True, True]]


def test_all_invalid_group_has_no_gradient_and_lone_valid_member_gets_zero() -> None:
    adv = grpo_advantages(t([[NAN, NAN, NAN], [NAN, 1, NAN], [1, 1, 1]]), EPS)
    close(adv.values, [[0, 0, 0], [0, 0, 0], [0, 0, 0]])
    assert adv.mask.tolist() == [[False, False, False], [False, True, False], [True, True, True]]


def test_grpo_batch_and_no_scaling() -> None:
    """algorithms.md §4.10's scale ∈ {group, batch, none} (TRL scale_rewards): the centred reward over
    one std of the whole batch's valid rewards, or over nothing."""
    rewards = t([[1, 0, 0, 0], [1, NAN, 1, 0]])
    centred = [[0.75, -0.25, -0.25, -0.25], [1 / 3, 0.0, 1 / 3, -2 / 3]]  # group means 1/4 and 2/3
    # the 7 valid rewards [1,0,0,0,1,1,0]: mean 3/7, Σ(r−m)² = 3·(4/7)² + 4·(3/7)² = 12/7, /6 → 2/7
    s = math.sqrt(2 / 7) + EPS
    batch = grpo_advantages(rewards, EPS, scale="batch")
    close(batch.values, [[x / s for x in row] for row in centred])
    assert batch.mask.tolist() == [[True] * 4, [True, False, True, True]]
    close(grpo_advantages(rewards, EPS, scale="none").values, centred)
    close(grpo_advantages(rewards, EPS, scale="none").values, dr_grpo_advantages(rewards).values.tolist())
    close(grpo_advantages(rewards, EPS).values, grpo_advantages(rewards, EPS, scale="group").values.tolist())
    # one valid reward in the whole batch: std 0, advantage 0 (never NaN)
    close(grpo_advantages(t([[NAN, 1], [NAN, NAN]]), EPS, scale="batch").values, [[0, 0], [0, 0]])
    with pytest.raises(ValueError, match="unknown reward scaling"):
        grpo_advantages(rewards, EPS, scale="std")


def test_dr_grpo_no_std() -> None:
    adv = dr_grpo_advantages(t([[1, 0, 0, 0], [2, NAN, 0, 1]]))
    close(adv.values, [[0.75, -0.25, -0.25, -0.25], [1.0, 0.0, -1.0, 0.0]])
    assert adv.mask.tolist()[1] == [True, False, True, True]


def test_gdpo_per_component_then_batch_normalisation() -> None:
    # One group of 4; components c1 = [1,1,0,0], c2 = [1,0,0,0].
    comps = torch.tensor([[[1, 1], [1, 0], [0, 0], [0, 0]]], dtype=torch.float64)
    valid = torch.ones(1, 4, dtype=torch.bool)
    adv = gdpo_advantages(comps, valid, [1.0, 1.0], EPS)
    a1 = 0.5 / (math.sqrt(1 / 3) + EPS)  # c1: mean .5, std √(1/3)
    a2p, a2n = 0.75 / (0.5 + EPS), -0.25 / (0.5 + EPS)  # c2: mean .25, std √((.5625+3·.0625)/3) = .5
    summed = [a1 + a2p, a1 + a2n, -a1 + a2n, -a1 + a2n]
    m = sum(summed) / 4
    sd = math.sqrt(sum((x - m) ** 2 for x in summed) / 3)
    close(adv.values, [[(x - m) / (sd + EPS) for x in summed]])
    # GRPO on the summed reward [2,1,0,0] would tie items 3 and 4 the same way, but GDPO keeps
    # (1,0) distinct from (1,1):
    assert adv.values[0, 0] > adv.values[0, 1] > adv.values[0, 2]


def test_gdpo_weights_and_masking() -> None:
    comps = torch.tensor(
        [[[1, 0], [0, 1], [9, 9]], [[1, NAN], [0, NAN], [1, 1]]],
        dtype=torch.float64,
    )
    valid = torch.tensor([[True, True, False], [True, True, True]])
    adv = gdpo_advantages(comps, valid, [2.0, 0.0], EPS)
    # item (0,2) is invalid: masked, and its 9s do not enter the group-0 statistics.
    a = 0.5 / (math.sqrt(0.5) + EPS)  # two valid members, [1,0]: mean .5, std √0.5
    g1 = 1 / 3  # group 1, c1 = [1,0,1]: mean 2/3, std √(1/3)
    s1 = math.sqrt(1 / 3) + EPS
    summed = [2 * a, -2 * a, 2 * g1 / s1, 2 * (-2 / 3) / s1, 2 * g1 / s1]  # c2 has weight 0
    m = sum(summed) / 5
    sd = math.sqrt(sum((x - m) ** 2 for x in summed) / 4)
    exp = [(x - m) / (sd + EPS) for x in summed]
    close(adv.values, [[exp[0], exp[1], 0.0], [exp[2], exp[3], exp[4]]])
    assert adv.mask.tolist() == [[True, True, False], [True, True, True]]


def test_mc_grpo_median_and_pivot() -> None:
    adv = mc_grpo_advantages(t([[1, 0, 1, 1, 0], [1, NAN, 0, 0, 1]]))
    # row 0: median 1 → A = r − 1; the first member equal to 1 (index 0) is the pivot, dropped.
    close(adv.values[0], [0, -1, 0, 0, -1])
    assert adv.mask[0].tolist() == [False, True, True, True, True]
    # row 1: valid [1,0,0,1] → lower median 0; pivot = index 2 (first 0); invalid index 1 masked.
    close(adv.values[1], [1, 0, 0, 0, 1])
    assert adv.mask[1].tolist() == [True, False, False, True, True]


def test_mc_grpo_mad_scaling_with_floor() -> None:
    adv = mc_grpo_advantages(t([[1, 0, 0]]), mad_scaling=True, mad_floor=0.1)
    # median 0, MAD = median(|[1,0,0]|) = 0, 0.5·std = 0.5·√(1/3) = 0.2887 > floor → A = 1/0.2887
    close(adv.values, [[1 / (0.5 * math.sqrt(1 / 3)), 0, 0]])
    assert adv.mask.tolist() == [[True, False, True]]


def test_rloo_leave_one_out_over_valid_members() -> None:
    # algorithms.md §4.6: A_i = r_i − mean of the others = G/(G−1)·(r_i − mean)
    adv = rloo_advantages(t([[1, 0, 0, 0], [1, NAN, 0, 0], [NAN, 2, NAN, NAN], [3, 3, 3, 3]]))
    # row 0: 1 − 0 = 1; 0 − 1/3 = −1/3. row 1 (3 valid): 1 − 0 = 1; 0 − (1+0)/2 = −1/2 (the invalid
    # member is neither a baseline member nor in the loss). row 2: no other member → 0. row 3: 0.
    close(adv.values, [[1, -1 / 3, -1 / 3, -1 / 3], [1, 0, -0.5, -0.5], [0, 0, 0, 0], [0, 0, 0, 0]])
    assert adv.mask.tolist() == [
        [True] * 4,
        [True, False, True, True],
        [False, True, False, False],
        [True] * 4,
    ]


def test_zero_variance_groups() -> None:
    z = zero_variance_groups(t([[1, 1, 1], [1, 0, 1], [NAN, 1, NAN], [NAN, NAN, NAN], [1, NAN, 1]]))
    assert z.tolist() == [True, False, True, True, True]


def test_zero_variance_groups_of_components() -> None:
    # [B, G, K]: a group is signal-free only when no component varies among its valid members
    comps = torch.tensor(
        [
            [[1, 0], [0, 1], [1, 0]],  # totals tie (1 each), components differ: signal
            [[1, 1], [1, 1], [1, 1]],  # nothing varies
            [[1, NAN], [1, 0], [1, 1]],  # b varies over its two present values
            [[1, NAN], [1, 0], [NAN, 1]],  # a: [1, 1]; b: [0, 1] varies
            [[NAN, NAN], [1, 0], [NAN, NAN]],  # one valid member: nothing to compare
        ],
        dtype=torch.float64,
    )
    assert zero_variance_groups(comps).tolist() == [False, True, False, False, True]
    assert zero_variance_groups(comps.sum(dim=-1)).tolist()[0] is True  # the total alone ties


def test_overlong_penalty() -> None:
    # L_max = 10, L_cache = 4: no penalty up to 6, then (6 − |y|)/4, −1 beyond 10.
    pen = overlong_penalty(torch.tensor([5, 6, 7, 10, 11]), max_length=10, cache_length=4, factor=0.5)
    close(pen, [0, 0, -0.125, -0.5, -0.5])


def test_component_matrix_none_is_nan() -> None:
    m = component_matrix([[{"a": 1.0, "b": None}, {"a": 0.0}]], ["a", "b"])
    assert m.shape == (1, 2, 2)
    assert m[0, 0, 0] == 1 and math.isnan(m[0, 0, 1]) and math.isnan(m[0, 1, 1])


@pytest.mark.parametrize("fn", [grpo_advantages, dr_grpo_advantages, mc_grpo_advantages, rloo_advantages])
def test_no_nan_ever_leaks(fn: object) -> None:
    adv = fn(t([[NAN, NAN, NAN], [NAN, 1, 0]]))  # type: ignore[operator]
    assert not torch.isnan(adv.values).any()


def test_a_flat_group_is_exactly_flat() -> None:
    """Three 0.1s: mean 0.1 and std 0 exactly, so every advantage is 0 (not ~1e-13, which still cost a
    forward/backward as a "non-zero" advantage); NaN members and other groups are unaffected."""
    r = torch.tensor([[0.1, 0.1, 0.1], [0.1, math.nan, 0.1], [0.1, 0.2, 0.3]], dtype=torch.float64)
    mean, std, count = group_mean_std(r)
    assert mean[0, 0].item() == 0.1 and std[0, 0].item() == 0.0
    assert mean[1, 0].item() == 0.1 and count[1, 0].item() == 2
    assert mean[2, 0].item() == pytest.approx(0.2) and std[2, 0].item() == pytest.approx(0.1)
    for adv in (grpo_advantages(r), rloo_advantages(r), dr_grpo_advantages(r)):
        assert adv.values[:2].abs().max().item() == 0.0
    all_nan = group_mean_std(torch.full((1, 3), math.nan, dtype=torch.float64))
    assert all_nan[0].item() == 0.0 and all_nan[1].item() == 0.0


def test_a_gdpo_group_with_no_signal_is_exactly_flat() -> None:
    """GDPO's batch step subtracts the batch mean of the summed advantages, which is 0 but for rounding
    (each component's group-normalised values sum to 0 in every group): a group in which no component
    varies got ~1e-16 instead of 0, so with the KL off its sequences still cost a forward/backward as
    "non-zero" advantages (the skip of zero-advantage sequences missed them). Found in review. A total of
    exactly 0 stays 0; the other groups keep their batch-normalised values."""
    comps = torch.tensor(
        [[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], [[0.3, 1.0], [0.3, 1.0], [0.3, 1.0]]], dtype=torch.float64
    )
    valid = torch.ones(2, 3, dtype=torch.bool)
    adv = gdpo_advantages(comps, valid, [1.0, 1.0], EPS)
    assert adv.values[1].abs().max().item() == 0.0 and adv.mask.all()
    a = (1 / 3) / (math.sqrt(1 / 3) + EPS)  # each component of group 0: [1,0,1] or [0,1,1]
    summed = [a - 2 * a, -2 * a + a, 2 * a, 0.0, 0.0, 0.0]
    m = sum(summed) / 6
    sd = math.sqrt(sum((x - m) ** 2 for x in summed) / 5)
    close(adv.values[0], [(x - m) / (sd + EPS) for x in summed[:3]])


@pytest.mark.parametrize("mad_scaling", [False, True])
def test_mc_grpo_a_group_has_signal_exactly_when_its_g_plus_1_valid_rewards_differ(mad_scaling: bool) -> None:
    """Dynamic sampling (and ``frac_zero_std_groups``) judges an MC-GRPO group on all G+1 valid rewards,
    its pivot's included, and that is the decision the loss makes: some member left in the loss has a
    non-zero advantage exactly when those rewards are not all equal (the pivot equals the median, so any
    member that differs from it is not the pivot and has ``r − b ≠ 0``; MAD scaling divides by at least
    the floor). Judged on the G trained members instead, ``[invalid, 1, invalid, 0]`` would be dropped
    (one trained member: "no variance"), though that member trains with ``A = 1``. Pinned after review
    of "accuracy includes pivot": the pivot is a real sample and the baseline, so it belongs here."""
    gen = torch.Generator().manual_seed(0)
    rows = torch.randint(0, 3, (400, 4), generator=gen).to(torch.float64) / 2  # ties are common
    rows[torch.rand(rows.shape, generator=gen) < 0.3] = NAN
    rows = torch.cat([rows, t([[NAN, 1, NAN, 0], [1, 1, 1, 0], [NAN, NAN, 1, NAN], [0.5] * 4])])
    adv = mc_grpo_advantages(rows, mad_scaling=mad_scaling)
    trains_on_signal = ((adv.values != 0) & adv.mask).any(dim=-1)
    assert torch.equal(zero_variance_groups(rows), ~trains_on_signal)
    assert trains_on_signal[-4:].tolist() == [True, True, False, False]
    assert adv.mask[-4].tolist() == [False, True, False, False]  # the 0 is the pivot: one member trains
