"""``noisy_corrected``: the unbiased reward of a verifier with known error rates.

"Reinforcement Learning with Verifiable yet Noisy Rewards under Imperfect Verifiers" (backward
correction). A verifier that says "correct" for a wrong answer with probability ρ0 (false-positive
rate, ``fp_rate``) and "wrong" for a correct one with probability ρ1 (false-negative rate,
``fn_rate``) has, for true correctness y ∈ {0, 1}::

    E[r̃ | y] = ρ0 + (1 − ρ0 − ρ1) · y          so          r̂ = (r̃ − ρ0) / (1 − ρ0 − ρ1)

is unbiased: ``E[r̂ | y] = y``. Policy-gradient estimates built on r̂ are therefore those of the clean
reward, in expectation, at the price of variance growing as ``1/(1 − ρ0 − ρ1)``. For a 0/1 verifier
the two values are ``(1 − ρ0)/(1 − ρ0 − ρ1)`` and ``−ρ0/(1 − ρ0 − ρ1)`` (ρ0 = 0.1, ρ1 = 0.2: 1.2857…
and −0.142857…): a "wrong" verdict becomes slightly negative because some of them are correct answers.
Other scores are mapped by the same affine formula (unbiased when the verifier's mean is affine in y).
The correction needs ρ0 + ρ1 < 1, a verifier better than chance; at ρ0 + ρ1 = 1 its verdict carries no
information and the formula divides by zero, so such rates are rejected (422).

Components: the inner reward's, plus ``observed``, the raw score r̃. An invalid inner item stays
invalid with its reason. The same correction is available on a ``composite`` component (``noise``).
A ``noisy_corrected`` reward as the verifier is refused (422), as ``noise`` on such a component is: its
score is already corrected, and correcting it again is biased.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import Field, PrivateAttr, model_validator

from rewardhub.errors import InvalidRequest
from rewardhub.protocol import RewardSpec, ScoreItem
from rewardhub.rewards.base import Outcome, RewardConfig, ScoreContext, register
from rewardhub.rewards.composed import ComposedReward, Part, resolve, run_part

__all__ = ["NoiseRates", "NoisyConfig", "NoisyCorrectedReward", "corrected"]


class NoiseRates(RewardConfig):
    fp_rate: float = Field(
        ge=0.0, lt=1.0, allow_inf_nan=False, description="ρ0: P(verifier says correct | answer is wrong)."
    )
    fn_rate: float = Field(
        ge=0.0, lt=1.0, allow_inf_nan=False, description="ρ1: P(verifier says wrong | answer is correct)."
    )

    @model_validator(mode="after")
    def _better_than_chance(self) -> NoiseRates:
        if self.fp_rate + self.fn_rate >= 1.0:
            raise ValueError(
                f"fp_rate + fn_rate must be < 1 (got {self.fp_rate + self.fn_rate:g}): "
                "a verifier at or below chance carries no signal to correct"
            )
        return self


def corrected(observed: float, rates: NoiseRates) -> float:
    """``(r − ρ0) / (1 − ρ0 − ρ1)`` (module docstring)."""
    return (observed - rates.fp_rate) / (1.0 - rates.fp_rate - rates.fn_rate)


class NoisyConfig(NoiseRates):
    reward: str | RewardSpec = Field(description="The verifier to correct: a name or {name, config}.")

    _part: Part | None = PrivateAttr(None)


@register
class NoisyCorrectedReward(ComposedReward[NoisyConfig]):
    name: ClassVar[str] = "noisy_corrected"
    # 1.0.1: a noisy_corrected verifier is a 422 (its corrected score was corrected again, and the outer
    # `observed` overwrote the inner raw score)
    version: ClassVar[str] = "1.0.1"
    description: ClassVar[str] = (
        "Unbiased reward from a noisy verifier with known false-positive/negative rates: "
        "(r − fp_rate) / (1 − fp_rate − fn_rate); component `observed` keeps the raw score."
    )
    config_model = NoisyConfig
    reads = ("response", "reference")

    def parse_config(self, raw: dict[str, Any]) -> NoisyConfig:
        config = super().parse_config(raw)
        config._part = resolve(self.runtime, config.reward, "reward.config.reward", self.name)
        if config._part.reward.name == self.name:
            where = "reward.config.reward"
            raise InvalidRequest(
                f"{self.name}: {where}: the verifier is already noisy_corrected; correcting it twice is "
                "(r - fp)/(1 - fp - fn) applied to a corrected score. Give the rates in one place",
                param=where,
            )
        return config

    def parts(self, config: NoisyConfig) -> Sequence[Part]:
        assert config._part is not None, "parse_config resolves the part"
        return (config._part,)

    async def score(
        self, items: Sequence[ScoreItem], config: NoisyConfig, ctx: ScoreContext
    ) -> list[Outcome]:
        out: list[Outcome] = []
        for o in await run_part(self.parts(config)[0], items, ctx):
            if o.score is None:
                out.append(o)
                continue
            components = {**o.components, "observed": o.score}
            out.append(
                Outcome(
                    corrected(o.score, config), o.reason, components, o.details, o.latency_ms, o.transient
                )
            )
        return out
