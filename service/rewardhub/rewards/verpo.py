"""``verpo``: a dense code reward whose tests weigh by how hard the group found them (algorithms.md §5.1).

"VeRPO: Verifiable Dense Reward Policy Optimization for Code Generation" (arXiv 2601.03525). A plain
partial reward (the fraction of unit tests passed) has a *cardinality bias*: a task's many easy tests
outweigh its one hard test, so a policy is paid most for what it can already do. VeRPO weighs each test
by its difficulty, estimated from the rollouts themselves: within the group of responses to one task,
with ``pass_ij`` whether response i passed test j::

    ρ_j     = mean_i pass_ij                  (the test's pass rate over the group)
    w_j     = (1 − ρ_j) + δ                   (harder tests weigh more; δ keeps an all-pass test alive)
    dense_i = Σ_j w_j pass_ij / Σ_j w_j
    R_i     = 1[all tests pass]_i + α · dense_i

so ``R`` lies in [0, 1 + α]. The paper states the shape (difficulty weights from the group's execution
statistics, integrated with the all-pass outcome); the exact weight function and the combination above
are the defaults algorithms.md gives, marked there as unverified, which is why ``alpha`` and ``delta``
are settings.

The tests are run by the ``code`` part (default ``"code"``, any ``{"name": "code", "config": ...}``),
once for the whole batch, and read from its ``details.pass_mask``. A member whose program did not
compile (``format``) or held no code (``no_answer``) passed no test. Members are pooled by group and by
their tests (their ``reference``: a group whose members carry different tests is several pools, and a
member without a program is in the pool of its own tests). A member the part could not score
(``sandbox_error``, ``missing_reference``, ...) keeps that invalid result and does not count towards
``ρ``. A part other than ``code`` reports no tests: every item is ``unsupported``.

Components: ``passed_all``, ``pass_rate`` (the plain fraction, unweighted), ``dense``. Details:
``tests``, ``pool_size`` (the members ``ρ`` was taken over), ``weights`` (``w_j``, the first 100).
Items without a ``group`` are invalid (``unsupported``): a group of one has no difficulty estimate. For
the same reason a pool of one member (a group of one, or the only member that carries its tests) is
``unsupported``: weighed by its own passes, every test it passed weighs δ and every one it failed 1 + δ,
so its dense term is ~0 unless it passed all (then 1), whatever the tests. Not cacheable: an item's
score depends on the other members.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import Field, PrivateAttr

from rewardhub import jsonutil
from rewardhub.groups import group_indices
from rewardhub.protocol import Reason, RewardSpec, ScoreItem
from rewardhub.rewards.base import Outcome, RewardConfig, ScoreContext, register
from rewardhub.rewards.code import CodeReward
from rewardhub.rewards.composed import ComposedReward, Part, resolve, run_part

__all__ = ["VerpoConfig", "VerpoReward", "verpo_rewards"]

_MAX_DETAIL_WEIGHTS = 100
_NO_TESTS_PASSED = (Reason.FORMAT, Reason.NO_ANSWER)  # valid 0s of `code` that ran no test


class VerpoConfig(RewardConfig):
    code: str | RewardSpec = Field(
        "code",
        description="The reward that runs the tests and reports details.pass_mask: code, or {name, config}.",
    )
    alpha: float = Field(
        0.5, ge=0.0, le=10.0, description="α: weight of the dense term next to the all-pass 1."
    )
    delta: float = Field(
        1e-3, gt=0.0, le=1.0, description="δ: the weight floor of a test every member passed."
    )

    _part: Part | None = PrivateAttr(None)


def verpo_rewards(
    masks: Sequence[Sequence[bool]], alpha: float, delta: float
) -> tuple[list[float], list[float], list[float]]:
    """``(R_i, dense_i, w_j)`` for one pool of members with the same tests (module docstring)."""
    n = len(masks)
    tests = len(masks[0]) if masks else 0
    if n == 0 or tests == 0:
        return [0.0] * n, [0.0] * n, []
    weights = [(1.0 - sum(m[j] for m in masks) / n) + delta for j in range(tests)]
    total = sum(weights)
    dense = [sum(w for w, ok in zip(weights, m, strict=True) if ok) / total for m in masks]
    rewards = [(1.0 if all(m) else 0.0) + alpha * d for m, d in zip(masks, dense, strict=True)]
    return rewards, dense, weights


@register
class VerpoReward(ComposedReward[VerpoConfig]):
    name: ClassVar[str] = "verpo"
    # 1.0.1: a part other than code is unsupported on every item (its format / no_answer 0s were scored 0);
    # pools by reference, not test count (a program-less member left ρ when another carried other tests)
    # 1.0.2: a pool of one member is unsupported (its tests were weighed by its own passes)
    version: ClassVar[str] = "1.0.2"
    description: ClassVar[str] = (
        "VeRPO dense code reward: 1[all tests pass] + α · the group-difficulty-weighted pass rate "
        "(w_j = 1 − the test's pass rate over the group + δ); tests run by `code`; needs `group` and "
        "two members with the same tests in it."
    )
    config_model = VerpoConfig
    reads = ("response", "reference", "group")
    cacheable = False
    group_aware: ClassVar[bool] = True

    def parse_config(self, raw: dict[str, Any]) -> VerpoConfig:
        config = super().parse_config(raw)
        config._part = resolve(self.runtime, config.code, "reward.config.code", self.name)
        return config

    def parts(self, config: VerpoConfig) -> Sequence[Part]:
        return (config._part,) if config._part is not None else ()

    async def score(
        self, items: Sequence[ScoreItem], config: VerpoConfig, ctx: ScoreContext
    ) -> list[Outcome]:
        part = config._part
        assert part is not None  # set by parse_config
        n = len(items)
        out: list[Outcome | None] = [None] * n
        todo: list[int] = []
        for i, item in enumerate(items):
            if item.group is None:
                out[i] = Outcome.invalid(
                    Reason.UNSUPPORTED,
                    "verpo needs a `group` id on every item (test weights are group-relative)",
                )
            else:
                todo.append(i)
        ran = await run_part(part, [items[i] for i in todo], ctx)
        # Only the code reward's valid 0s for format / no_answer mean "no program, so no test passed";
        # another part's (math's no_answer, a composite's failed format gate) says nothing about tests,
        # and scoring it 0 would give valid zeros beside the unsupported items of the same part.
        reads_blanks = isinstance(part.reward, CodeReward)
        masks: dict[int, list[bool] | None] = {}  # None: passed nothing, test count unknown (no program)
        why: dict[int, Reason] = {}  # the code part's reason for a valid 0 (format, no_answer): kept
        for i, v in zip(todo, ran, strict=True):
            mask = v.details.get("pass_mask")
            if v.score is None:
                out[i] = v  # the part's own invalid result (sandbox_error, missing_reference, ...)
            elif isinstance(mask, str) and set(mask) <= {"0", "1"}:
                masks[i] = [c == "1" for c in mask]
            elif reads_blanks and v.reason in _NO_TESTS_PASSED:
                masks[i], why[i] = None, v.reason
            else:
                out[i] = Outcome.invalid(
                    Reason.UNSUPPORTED,
                    f"reward {part.reward.name!r} reports no per-test results (details.pass_mask): verpo "
                    "needs the code reward",
                )
        tests = {i: jsonutil.canonical(items[i].reference) for i in masks}
        for idx in group_indices(items, list(masks)).values():
            self._score_group(idx, masks, why, tests, config, out)
        return [o if o is not None else Outcome.invalid(Reason.INTERNAL_ERROR) for o in out]

    @staticmethod
    def _score_group(
        idx: list[int],
        masks: dict[int, list[bool] | None],
        why: dict[int, Reason],
        tests: dict[int, bytes],
        config: VerpoConfig,
        out: list[Outcome | None],
    ) -> None:
        """Score one group, pooled by the members' tests (``tests``: each member's reference, canonical):
        ρ_j is only meaningful over members that ran the same tests, and a member without a program
        belongs to the pool of its own reference, whatever tests other members of the group carry. Such a
        member keeps the code part's reason for its 0 (``why``: format, no_answer)."""
        pools: dict[tuple[bytes, int], list[int]] = {}
        for i in idx:
            m = masks[i]
            if m is not None:
                pools.setdefault((tests[i], len(m)), []).append(i)
        filled = {i: m for i, m in ((i, masks[i]) for i in idx) if m is not None}
        for i in (i for i in idx if masks[i] is None):
            mine = [key for key in pools if key[0] == tests[i]]
            if len(mine) == 1:  # passed none of its pool's tests
                pools[mine[0]].append(i)
                filled[i] = [False] * mine[0][1]
                continue
            out[i] = Outcome(
                0.0,
                why[i],
                {"passed_all": 0.0, "pass_rate": 0.0, "dense": 0.0},
                {
                    "tests": None,
                    "pool_size": 0,
                    "message": "no program ran, and no member with its tests ran either",
                },
            )
        for members in pools.values():
            if len(members) == 1:
                (i,) = members
                out[i] = Outcome.invalid(
                    Reason.UNSUPPORTED,
                    "verpo needs two members with the same tests in the group (this one is alone with "
                    "its tests): its own passes give no difficulty estimate",
                    tests=len(filled[i]),
                    pool_size=1,
                )
                continue
            rows = [filled[i] for i in members]
            rewards, dense, weights = verpo_rewards(rows, config.alpha, config.delta)
            for i, row, r, d in zip(members, rows, rewards, dense, strict=True):
                out[i] = Outcome(
                    r,
                    why.get(i),
                    {
                        "passed_all": 1.0 if row and all(row) else 0.0,
                        "pass_rate": sum(row) / len(row) if row else 0.0,
                        "dense": d,
                    },
                    {
                        "tests": len(row),
                        "pool_size": len(members),
                        "weights": [round(w, 6) for w in weights[:_MAX_DETAIL_WEIGHTS]],
                    },
                )
