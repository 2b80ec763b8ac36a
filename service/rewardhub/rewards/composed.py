"""Rewards built on other rewards (``composite``, ``calibration``, ``noisy_corrected``, ``group_length``).

Such a reward names its parts in its config (``"math"`` or ``{"name": "math", "config": {...}}``, the
wire format of :class:`~rewardhub.protocol.RewardSpec`). :func:`resolve` looks each part up in the
registry (``runtime.reward_registry()``) and validates its config with the part's own ``parse_config``
when the outer config is parsed, so a bad part is a 422 naming its path
(``reward.config.components.1.reward.config.extraction``) before anything is scored. Nesting is
bounded (:data:`MAX_DEPTH`), and so is a composite's whole tree (:data:`MAX_PARTS` rewards at all
depths).

What the serving layer needs to know about a reward then depends on its config, so
:class:`ComposedReward` answers it per config:

* ``version_for(config)``: the reward's own version plus a short hash of its parts' names and
  (effective) versions, ``"1.0.0+3f2a9c01d4"``. It is the ``reward_version`` of every result and part of
  the cache key, so bumping ``math`` changes the version of every composite containing it and stale
  cached composites are never served;
* ``reads_for(config)``: the union of the parts' ``reads`` (the cache key must hash every field any part
  reads);
* ``is_cacheable(config)``: only if every part is;
* ``uses_groups(config)``: if any part is a group reward (then it gets the whole-group checks).

A plain :class:`~rewardhub.rewards.base.Reward` is described by its class attributes; a group reward
declares ``group_aware = True``. The free functions :func:`effective_version`, :func:`effective_reads`
and :func:`uses_groups` answer for either kind.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import structlog

from rewardhub.errors import InvalidRequest, RewardHubError, UnknownReward
from rewardhub.protocol import INVALID_REASONS, Reason, RewardSpec, ScoreItem
from rewardhub.rewards.base import FIELD_ORDER, ConfigT, Outcome, Part, Reward, ScoreContext

if TYPE_CHECKING:
    from rewardhub.runtime.context import Runtime

__all__ = [
    "FIELD_ORDER",
    "MAX_DEPTH",
    "MAX_PARTS",
    "ComposedReward",
    "Part",
    "resolve",
    "run_part",
    "tree_size",
]

log = structlog.get_logger("rewardhub.rewards.composed")

MAX_DEPTH = 4
# Most rewards in one tree, at all depths: a composite's 16 components nested 4 deep would otherwise be
# 65,536 parts, each scoring the whole batch and reporting in every item's components.
MAX_PARTS = 64

_depth: ContextVar[int] = ContextVar("rewardhub_compose_depth", default=0)


def _spec(spec: str | RewardSpec) -> tuple[str, dict[str, Any]]:
    return (spec, {}) if isinstance(spec, str) else (spec.name, spec.config)


def resolve(runtime: Runtime, spec: str | RewardSpec, where: str, owner: str) -> Part:
    """Look a part up and validate its config; errors are re-based onto ``where`` (a ``reward.…`` path).

    Raises:
        UnknownReward: the name is not registered (404, as for a top-level reward).
        InvalidRequest: its config is invalid, or rewards nest deeper than :data:`MAX_DEPTH`.
    """
    name, raw = _spec(spec)
    depth = _depth.get()
    if depth >= MAX_DEPTH:
        raise InvalidRequest(f"{owner}: {where}: rewards nest more than {MAX_DEPTH} levels deep", param=where)
    try:
        reward = runtime.reward_registry().get(name)
    except UnknownReward as exc:
        raise UnknownReward(f"{owner}: {where}: {exc.message}", param=where) from None
    token = _depth.set(depth + 1)
    try:
        config = reward.parse_config(raw)
    except InvalidRequest as exc:
        inner = exc.param or "reward"
        param = where + inner[len("reward") :] if inner.startswith("reward") else f"{where}.{inner}"
        prefix = f"{reward.name}: {exc.param}: "
        detail = exc.message[len(prefix) :] if exc.message.startswith(prefix) else exc.message
        raise InvalidRequest(f"{owner}: {param}: {detail}", param=param) from None
    finally:
        _depth.reset(token)
    return Part(reward, config, where)


def tree_size(reward: Reward[Any], config: Any) -> int:
    """How many rewards sit below ``reward`` with this config, at all depths (bounded by :data:`MAX_PARTS`)."""
    return sum(1 + tree_size(p.reward, p.config) for p in reward.parts(config))


class ComposedReward(Reward[ConfigT]):
    """A reward built on other rewards; subclasses return their resolved parts from :meth:`parts`.

    The per-config answers (version, fields read, cacheability, groups, deadline) live on
    :class:`~rewardhub.rewards.base.Reward` and account for :meth:`parts`. A valid outcome built from a
    part's transient one (``Outcome.transient``: a stand-in for a part that failed for the moment) must
    be transient too, or the serving layer caches it.
    """


def _checked(o: Outcome) -> Outcome:
    """The serving layer's rules for one outcome, applied to a part's: finite scores, invalid reasons."""
    if o.score is not None and not math.isfinite(o.score):
        return Outcome.invalid(Reason.INTERNAL_ERROR, "the reward produced a non-finite score", **o.details)
    if o.score is None and (o.reason is None or o.reason not in INVALID_REASONS):
        o.reason = Reason.INTERNAL_ERROR
    return o


def part_deadline(part: Part, ctx: ScoreContext) -> float:
    """The per-item deadline a part scores under. Without ``options.timeout_s`` the owner's default is
    the longest of its parts' (a judge's 60 s), and each part gets its own instead (the math part of a
    math + judge composite keeps ``REWARDHUB_ITEM_TIMEOUT_S``, so a stuck item holds a CPU worker that
    long, not a minute); a request's explicit deadline applies to every part as given."""
    if ctx.explicit_deadline:
        return ctx.deadline_s
    default = part.reward.runtime.settings.default_deadline(part.reward.timeout_for(part.config))
    return min(default, ctx.deadline_s)


async def run_part(part: Part, items: Sequence[ScoreItem], ctx: ScoreContext) -> list[Outcome]:
    """Score one batch with a part; a crash makes every item invalid (``internal_error``), as in serving."""
    if not items:
        return []
    r = part.reward
    ctx = replace(ctx, deadline_s=part_deadline(part, ctx))
    if ctx.part_items is not None:
        items = ctx.part_items(part, items)
    try:
        outcomes = await r.score(items, part.config, ctx)
        if len(outcomes) != len(items):
            raise RuntimeError(f"reward {r.name} returned {len(outcomes)} outcomes for {len(items)} items")
    except RewardHubError:
        raise  # request-level (overloaded, unavailable): the whole request fails, as for a top-level reward
    except Exception as exc:
        log.exception("part_failed", reward=r.name, items=len(items))
        msg = f"{r.name}: {type(exc).__name__}: {exc}"[:300]
        return [Outcome.invalid(Reason.INTERNAL_ERROR, msg) for _ in items]
    return [_checked(o) for o in outcomes]
