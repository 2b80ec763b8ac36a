"""``composite``: several rewards as one, with gates, weights or a formula, and every component reported.

A composite lists components, each a reward with its config::

    {"components": [
        {"reward": {"name": "format", "config": {"preset": "answer"}}, "gate": true},
        {"reward": "math", "weight": 1.0},
        {"reward": "calibration", "weight": 0.5}
     ],
     "formula": null}

Each component's reward is called **once for the whole batch** (all components concurrently), so the
size of the tree is bounded: at most 16 components, nested at most 4 deep, and 64 rewards in all
(:data:`~rewardhub.rewards.composed.MAX_PARTS`; more is a 422). Then, per item, in this order:

1. **Gates** (``gate: true``): if a gate scores below its ``gate_threshold`` (default 1.0, i.e. a 1/0
   check must pass), the composite is ``gate_score`` (default 0) with the gate's reason, whatever the
   other components say (so their invalidity does not matter). Otherwise, an *invalid* gate makes the
   composite invalid with the gate's reason: it cannot be known whether it would have passed. A gate's
   own ``on_invalid`` overrides that (the composite's does not apply to gates): ``zero`` scores the
   invalid gate 0, so it fails a threshold above 0 (the composite's valid ``gate_score`` then has no
   reason; the gate's invalid one stays in ``details.parts``); ``skip`` leaves the gate out, as if it
   had passed.
2. **Invalid components** (``on_invalid``, per component, else the composite's): ``invalid`` (default)
   makes the composite invalid with the first such component's reason (a trainer masks it); ``zero``
   counts it as 0; ``skip`` leaves it out and rescales the weighted sum by Σ|w| / Σ|w of the rest|, so
   the total weight is kept (``skip`` is not available with a formula, which needs every name; a
   composite whose weighted components, or all of whose components, were skipped is invalid).
3. **Combination**: without ``formula``, ``Σ weight_i · score_i`` (weights default to 1, and to 0 for
   gates, which then only gate); with ``formula``, an arithmetic expression over the component names
   (:mod:`rewardhub.formula`: ``+ - * / **``, parentheses, numbers, ``min max abs sqrt log exp clip``;
   parsed with a whitelist, never ``eval``'d; a bad formula or unknown name is a 422 at config time),
   e.g. ``"math * (1 + 0.5 * calibration) - 0.1 * max(0, length)"``. An arithmetic fault on an item
   (division by zero, ``log(0)``) makes that item invalid (``unsupported``) with the formula's message,
   and so does a weighted sum past the float range; weights whose magnitudes cannot even be summed are
   a 422.

A component may carry ``noise: {fp_rate, fn_rate}``: its score is replaced by the noisy-verifier
correction ``(r − fp_rate)/(1 − fp_rate − fn_rate)`` (see ``noisy_corrected``) before gating and
combination, and ``<name>.observed`` keeps the raw score (not on a ``noisy_corrected`` component, which
would correct twice: a 422).

**Components** of the result: every component's score under its name (``name``, default the reward
name; names must be unique identifiers, not function names), null when it is invalid, and each
component's own components flattened as ``<name>.<sub>`` (``calibration.confidence``,
``format.answer:present``, and so on to any depth), so a trainer can normalise per component (GDPO).
Details: ``parts`` (each component's reason and details), and ``gate_failed`` / ``zeroed`` / ``skipped``
(component names) when those rules applied.

**Caching and versions**: a composite is cacheable only when every component is; its
``reward_version`` is ``<own version>+<hash of the components' names and versions>``, so changing any
component's version (``math`` 1.0.0 → 1.1.0) changes the composite's version and its cache keys, and a
stale composite result is never served. The cache key also hashes every field any component reads,
and each component's reward as its name, version and validated config (``Reward.cache_config``), so
``"math"`` and ``{"name": "math", "config": {}}`` key alike.
"""

from __future__ import annotations

import keyword
import math
import re
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import Field, PrivateAttr, model_validator

from rewardhub.aio import gather_all
from rewardhub.errors import InvalidRequest
from rewardhub.formula import FUNCTIONS, Formula, FormulaError, FormulaEvalError, parse_formula
from rewardhub.protocol import TRANSIENT_REASONS, Reason, RewardSpec, ScoreItem
from rewardhub.rewards.base import Outcome, RewardConfig, ScoreContext, register
from rewardhub.rewards.composed import MAX_PARTS, ComposedReward, Part, resolve, run_part, tree_size
from rewardhub.rewards.noisy import NoiseRates, corrected

__all__ = ["Component", "CompositeConfig", "CompositeReward"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
OnInvalid = Literal["invalid", "zero", "skip"]


class Component(RewardConfig):
    reward: str | RewardSpec = Field(description="A reward name or {name, config}.")
    name: str | None = Field(
        None, description="Component key (default: the reward's name); a formula variable."
    )
    weight: float | None = Field(
        None,
        allow_inf_nan=False,
        description="Weight in the sum (default 1; 0 for gates). Not with a formula.",
    )
    gate: bool = Field(False, description="Below gate_threshold, the whole composite scores gate_score.")
    gate_threshold: float = Field(1.0, allow_inf_nan=False, description="A gate passes iff score ≥ this.")
    on_invalid: OnInvalid | None = Field(
        None,
        description="Override the composite's on_invalid for this one; on a gate: zero = the gate fails, "
        "skip = it is left out (default: an invalid gate makes the composite invalid).",
    )
    noise: NoiseRates | None = Field(
        None, description="Noisy-verifier correction {fp_rate, fn_rate}: (r − fp)/(1 − fp − fn)."
    )

    @property
    def key(self) -> str:
        if self.name is not None:
            return self.name
        return self.reward if isinstance(self.reward, str) else self.reward.name

    @property
    def effective_weight(self) -> float:
        if self.weight is not None:
            return self.weight
        return 0.0 if self.gate else 1.0


class CompositeConfig(RewardConfig):
    components: tuple[Component, ...] = Field(min_length=1, max_length=16, description="The parts.")
    formula: str | None = Field(
        None,
        max_length=500,
        description="Arithmetic over component names (+ - * / ** min max abs sqrt log exp clip); "
        "default: the weighted sum.",
    )
    on_invalid: OnInvalid = Field(
        "invalid", description="An invalid non-gate component: invalid (propagate) | zero | skip (reweight)."
    )
    gate_score: float = Field(0.0, allow_inf_nan=False, description="The score when a gate fails.")

    _parts: tuple[Part, ...] = PrivateAttr(())
    _formula: Formula | None = PrivateAttr(None)

    @model_validator(mode="after")
    def _check(self) -> CompositeConfig:
        keys = [c.key for c in self.components]
        for k in keys:
            if not _NAME.fullmatch(k) or keyword.iskeyword(k) or k in FUNCTIONS:
                raise ValueError(
                    f"component name {k!r} must be an identifier (letters, digits, _), not a keyword "
                    f"or a function name ({', '.join(FUNCTIONS)}); set `name`"
                )
        dup = next((k for k in keys if keys.count(k) > 1), None)
        if dup is not None:
            raise ValueError(f"component name {dup!r} is used twice; give each component a distinct `name`")
        try:
            total = math.fsum(abs(c.effective_weight) for c in self.components)
        except OverflowError:
            total = math.inf
        if not math.isfinite(total):
            raise ValueError("the weights' magnitudes sum past the largest float; use smaller weights")
        if self.formula is not None:
            explicit = next((c.key for c in self.components if c.weight is not None), None)
            if explicit is not None:
                raise ValueError(
                    f"component {explicit!r}: `weight` has no effect with a formula; write it in the formula"
                )
            if self.on_invalid == "skip" or any(c.on_invalid == "skip" for c in self.components):
                raise ValueError(
                    "on_invalid 'skip' needs the weighted sum; with a formula use 'zero' or 'invalid'"
                )
            try:
                self._formula = parse_formula(self.formula, keys)
            except FormulaError as exc:
                raise ValueError(f"formula: {exc}") from None
        return self


@register
class CompositeReward(ComposedReward[CompositeConfig]):
    name: ClassVar[str] = "composite"
    # 1.1.1: a gate zeroed by its on_invalid no longer gives its invalid reason to the valid gate_score
    version: ClassVar[str] = "1.1.1"
    description: ClassVar[str] = (
        "Several rewards as one: gates, a weighted sum or a safe arithmetic formula over component "
        "names, per-component noisy-verifier correction; every component (and its sub-components, as "
        "name.sub) in `components`. Cacheable iff every component is."
    )
    config_model = CompositeConfig
    reads = ("response", "reference")

    def parse_config(self, raw: dict[str, Any]) -> CompositeConfig:
        config = super().parse_config(raw)
        config._parts = tuple(
            resolve(self.runtime, c.reward, f"reward.config.components.{k}.reward", self.name)
            for k, c in enumerate(config.components)
        )
        size = tree_size(self, config)
        if size > MAX_PARTS:
            where = "reward.config.components"
            raise InvalidRequest(
                f"{self.name}: {where}: the composite holds {size} rewards at all depths; at most "
                f"{MAX_PARTS} are allowed (each one scores the whole batch)",
                param=where,
            )
        for k, (c, part) in enumerate(zip(config.components, config._parts, strict=True)):
            if c.noise is not None and part.reward.name == "noisy_corrected":
                where = f"reward.config.components.{k}.noise"
                raise InvalidRequest(
                    f"{self.name}: {where}: the component is already noisy_corrected; correcting it twice "
                    "is (r - fp)/(1 - fp - fn) applied to a corrected score. Give the rates in one place",
                    param=where,
                )
        return config

    def parts(self, config: CompositeConfig) -> Sequence[Part]:
        return config._parts

    async def score(
        self, items: Sequence[ScoreItem], config: CompositeConfig, ctx: ScoreContext
    ) -> list[Outcome]:
        batches = await gather_all(*(run_part(p, items, ctx) for p in config._parts))
        out = []
        for i in range(len(items)):
            parts = [b[i] for b in batches]
            o = self._combine(config, parts)
            # zeroed or skipped over a part's timeout or backend failure: right now, not for the cache;
            # and an invalid composite over such a part is too, so an outer composite that zeroes or
            # skips it does not cache its stand-in (the inner reason, e.g. ``unsupported``, hides it)
            o.transient = any(
                p.transient or (p.score is None and p.reason in TRANSIENT_REASONS) for p in parts
            )
            out.append(o)
        return out

    @staticmethod
    def _combine(config: CompositeConfig, outs: list[Outcome]) -> Outcome:
        comps = config.components
        components: dict[str, float | None] = {}
        values: dict[str, float | None] = {}
        parts_details: dict[str, Any] = {}
        for c, o in zip(comps, outs, strict=True):
            s = o.score
            if s is not None and c.noise is not None:
                s = corrected(s, c.noise)
            values[c.key] = s
            components[c.key] = s
            for sub, v in o.components.items():
                components[f"{c.key}.{sub}"] = v
            if c.noise is not None:
                components[f"{c.key}.observed"] = o.score
            parts_details[c.key] = {"reason": o.reason.value if o.reason else None, "details": o.details}
        details: dict[str, Any] = {"parts": parts_details}

        # 1. gates (an invalid one by its own on_invalid: zero fails it, skip leaves it out)
        failed = []
        for c, o in zip(comps, outs, strict=True):
            s = values[c.key]
            if c.gate and s is None and c.on_invalid == "zero":
                s = 0.0
            if c.gate and s is not None and s < c.gate_threshold:
                failed.append((c, o))
        if failed:
            details["gate_failed"] = [c.key for c, _ in failed]
            # the failing gate's reason ("format"), but not an invalid one of a gate zeroed by its
            # on_invalid: this score is valid, and a trainer masks the items with an invalid reason
            first = failed[0][1]
            return Outcome(config.gate_score, first.reason if first.valid else None, components, details)
        for c, o in zip(comps, outs, strict=True):
            if c.gate and o.score is None and c.on_invalid in (None, "invalid"):
                return _invalid(f"gate component {c.key!r} could not be scored", o, components, details)

        # 2. invalid components
        used: dict[str, float] = {}
        skipped: list[str] = []
        zeroed: list[str] = []
        for c, o in zip(comps, outs, strict=True):
            s = values[c.key]
            if s is not None:
                used[c.key] = s
                continue
            rule = c.on_invalid or config.on_invalid  # (a gate here has its own: zero or skip)
            if rule == "invalid":
                return _invalid(f"component {c.key!r} could not be scored", o, components, details)
            if rule == "zero":
                used[c.key] = 0.0
                zeroed.append(c.key)
            else:
                skipped.append(c.key)
        if zeroed:
            details["zeroed"] = zeroed
        if skipped:
            details["skipped"] = skipped

        # 3. combination
        if config._formula is not None:
            try:
                score = config._formula.evaluate(used)
            except FormulaEvalError as exc:
                out = Outcome.invalid(Reason.UNSUPPORTED, f"formula: {exc}", **details)
                out.components = components
                return out
            return Outcome(score, None, components, details)
        total = math.fsum(abs(c.effective_weight) for c in comps)
        kept = math.fsum(abs(c.effective_weight) for c in comps if c.key in used)
        if skipped and (not used or (total > 0 and kept == 0)):  # nothing scored, or nothing weighted
            first = next(o for c, o in zip(comps, outs, strict=True) if c.key == skipped[0])
            what = "every weighted component" if used else "every component"
            return _invalid(f"{what} was skipped", first, components, details)
        scale = total / kept if skipped and kept > 0 else 1.0
        try:
            score = scale * math.fsum(c.effective_weight * used[c.key] for c in comps if c.key in used)
        except OverflowError:
            score = math.inf
        if not math.isfinite(score):  # as a formula's overflow: this item, not the server, is at fault
            out = Outcome.invalid(Reason.UNSUPPORTED, "the weighted sum is not a finite number", **details)
            out.components = components
            return out
        return Outcome(score, None, components, details)


def _invalid(
    message: str, part: Outcome, components: dict[str, float | None], details: dict[str, Any]
) -> Outcome:
    """The composite is invalid with the part's reason (its message appended)."""
    inner = part.details.get("message")
    reason = part.reason if part.reason is not None else Reason.INTERNAL_ERROR
    out = Outcome.invalid(reason, f"{message}: {inner}" if inner else message, **details)
    out.components = components
    return out
