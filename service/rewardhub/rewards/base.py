"""The reward plug-in contract and the registry.

A reward kind is one module under ``rewardhub/rewards/`` holding one :class:`Reward` subclass decorated
with :func:`register`. A reward is *batch in, batch out*: :meth:`Reward.score` gets every item of a
request that uses it (with one validated config) and returns one :class:`Outcome` per item, same order.
It never raises for a single bad item: an item it cannot score is ``Outcome.invalid(reason)``.

Class attributes declare what the service needs to know without calling it:

* ``name`` / ``version``: the version goes into the cache key and every result, so bump it whenever the
  reward's behaviour changes and stale cache entries can never be served;
* ``config_model``: a pydantic model (frozen, ``extra="forbid"``) whose JSON schema is published in
  ``GET /v1/rewards``;
* ``reads``: the item fields the score depends on; they, the config and the version make the cache key;
* ``cacheable``: only pure functions of those inputs are cached (override :meth:`Reward.is_cacheable`
  when it depends on the config, e.g. a sampled judge);
* ``group_aware``: the score of an item depends on the other members of its ``group`` (majority vote):
  the service then insists on whole groups and never caches per item;
* ``default_timeout_s``: the per-item deadline when the request sets none (a judge needs more than the
  service-wide default).

A reward built on other rewards (a composite, a wrapper) names them in its config; :meth:`Reward.parts`
returns them, and everything the serving layer asks — :meth:`~Reward.version_for` (the version in the
result and cache key: the reward's own plus a hash of its parts' versions, so bumping ``math`` changes
every composite containing it), :meth:`~Reward.reads_for`, :meth:`~Reward.is_cacheable`,
:meth:`~Reward.uses_groups`, :meth:`~Reward.timeout_for` — then accounts for the parts.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from rewardhub.errors import InvalidRequest, UnknownReward
from rewardhub.protocol import Reason, ScoreItem

if TYPE_CHECKING:
    from rewardhub.runtime.context import Runtime

__all__ = [
    "FIELD_ORDER",
    "Outcome",
    "Part",
    "Reward",
    "RewardConfig",
    "RewardRegistry",
    "ScoreContext",
    "register",
    "registered",
    "unavailable_parts",
]


class RewardConfig(BaseModel):
    """Base of every reward's config: immutable, unknown keys rejected (typos must not pass silently)."""

    # ser_json_inf_nan: model_dump(mode="json") keeps NaN/Infinity (in a free-form schema too) instead of
    # writing them as None, so the cache key (serving.py: config_digest) tells them from null.
    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_inf_nan="constants")


ConfigT = TypeVar("ConfigT", bound=RewardConfig)

# What a worker-pool failure (rewardhub.runtime.process_pool.TaskResult.error) means for the item.
_POOL_REASONS: dict[str, Reason] = {
    "timeout": Reason.TIMEOUT,
    "memory": Reason.RESOURCE_LIMIT,
    "crash": Reason.RESOURCE_LIMIT,
    "exception": Reason.INTERNAL_ERROR,
}

# The item fields, in the order they enter a cache key.
FIELD_ORDER = ("prompt", "response", "reference", "group", "metadata")


@dataclass(slots=True)
class Outcome:
    """What a reward returns for one item (the service adds id, cached, version, latency)."""

    score: float | None
    reason: Reason | None = None
    components: dict[str, float | None] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    latency_ms: float | None = None
    # A valid score that stands in for a part that failed for a reason of the moment (a composite's
    # ``on_invalid: zero`` over a judge timeout): served, never cached, so a later request re-scores it.
    # On an invalid outcome: its failure is of this moment or this server (an unavailable model
    # backend, whose reason ``unsupported`` alone does not say so), so what is built on it is transient.
    transient: bool = False

    @classmethod
    def invalid(
        cls, reason: Reason, message: str | None = None, *, transient: bool = False, **details: Any
    ) -> Outcome:
        if message is not None:
            details["message"] = message
        return cls(score=None, reason=reason, details=details, transient=transient)

    @classmethod
    def pool_failure(cls, error: str | None, message: str | None = None, **details: Any) -> Outcome:
        """An item the CPU worker pool could not finish (``TaskResult.error``): past its deadline, over
        its memory limit, a crashed worker, or an exception in the task."""
        return cls.invalid(_POOL_REASONS.get(error or "exception", Reason.INTERNAL_ERROR), message, **details)

    @property
    def valid(self) -> bool:
        return self.score is not None


@dataclass(slots=True, frozen=True)
class ScoreContext:
    """Per-request settings a reward may honour."""

    deadline_s: float
    include_details: bool = True
    explicit_deadline: bool = False  # the request set options.timeout_s (then it beats reward defaults)
    # A composed reward's say in what each part below it gets, at any depth: run_part passes every part's
    # items through it (calibration gives each verifier inside a composite the text that one reads).
    part_items: Callable[[Part, Sequence[ScoreItem]], Sequence[ScoreItem]] | None = None


@dataclass(frozen=True, slots=True)
class Part:
    """A resolved sub-reward of a composed reward: the instance, its validated config, and where the
    owner's config names it (``reward.config.components.1.reward``, relative to the owner)."""

    reward: Reward[Any]
    config: RewardConfig
    where: str = "reward"


def _put_at(dumped: dict[str, Any], where: str, value: Any) -> None:
    """Set the value at ``where`` (``reward.config.components.1.reward``, a part's place in its owner's
    config) in the owner's dumped config. A place not found leaves the dump as it is: the part's spec
    then stays as written (equivalent specs miss each other, never collide)."""
    path = where.split(".")
    if path[:2] != ["reward", "config"] or len(path) < 3:
        return
    node: Any = dumped
    for step in path[2:-1]:
        if isinstance(node, dict) and step in node:
            node = node[step]
        elif isinstance(node, list) and step.isdigit() and int(step) < len(node):
            node = node[int(step)]
        else:
            return
    if isinstance(node, dict) and path[-1] in node:
        node[path[-1]] = value


class Reward(ABC, Generic[ConfigT]):
    """Base class of a reward kind (see the module docstring for the contract)."""

    name: ClassVar[str]
    version: ClassVar[str]
    description: ClassVar[str]
    config_model: ClassVar[type[RewardConfig]] = RewardConfig
    reads: ClassVar[tuple[str, ...]] = ("response", "reference")
    cacheable: ClassVar[bool] = True
    group_aware: ClassVar[bool] = False
    default_timeout_s: ClassVar[float | None] = None

    def __init__(self, runtime: Runtime):
        self.runtime = runtime

    def parse_config(self, raw: dict[str, Any]) -> ConfigT:
        """Validate a request's config; a bad config is a 422 naming the field."""
        try:
            return self.config_model.model_validate(raw)  # type: ignore[return-value]
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err.get("loc", ()))
            where = f"reward.config.{loc}" if loc else "reward.config"
            raise InvalidRequest(f"{self.name}: {where}: {err.get('msg')}", param=where) from None

    # --- what the serving layer asks, per config -------------------------------------------------
    def parts(self, config: ConfigT) -> Sequence[Part]:
        """The rewards this one is built on (none for a plain reward)."""
        return ()

    def version_for(self, config: ConfigT) -> str:
        parts = self.parts(config)
        if not parts:
            return self.version
        ids = [[p.reward.name, p.reward.version_for(p.config)] for p in parts]
        return f"{self.version}+{hashlib.sha256(orjson.dumps(ids)).hexdigest()[:10]}"

    def cache_config(self, config: ConfigT) -> dict[str, Any]:
        """The config as the cache key hashes it: validated, defaults filled in, and each part's spec in
        it (``reward.config.components.0.reward``) written as its name, version and own cache config. A
        part given as ``"math"``, ``{"name": "math"}`` or ``{"name": "math", "config": {<its defaults>}}``
        then keys alike, while any difference in its validated config still changes the key."""
        dumped: dict[str, Any] = config.model_dump(mode="json")
        for p in self.parts(config):
            spec = {
                "name": p.reward.name,
                "version": p.reward.version_for(p.config),
                "config": p.reward.cache_config(p.config),
            }
            _put_at(dumped, p.where, spec)
        return dumped

    def reads_for(self, config: ConfigT) -> tuple[str, ...]:
        fields = set(self.reads)
        for p in self.parts(config):
            fields.update(p.reward.reads_for(p.config))
        return tuple(f for f in FIELD_ORDER if f in fields)

    def uses_groups(self, config: ConfigT) -> bool:
        return self.group_aware or any(p.reward.uses_groups(p.config) for p in self.parts(config))

    def is_cacheable(self, config: ConfigT) -> bool:
        return (
            self.cacheable
            and not self.uses_groups(config)
            and all(p.reward.is_cacheable(p.config) for p in self.parts(config))
        )

    def unavailable(self) -> str | None:
        """Why this reward cannot score with its default configuration here (a model reward whose
        backend is not configured, a code reward with no working sandbox), else None: the catalog shows
        it, so a trainer can refuse to start rather than train on every item coming back invalid."""
        return None

    def unavailable_for(self, config: ConfigT) -> str | None:
        """As :meth:`unavailable`, for this config (a model reward's config may name another backend).
        This reward's own answer only; :func:`unavailable_parts` walks the parts too."""
        return self.unavailable()

    def timeout_for(self, config: ConfigT) -> float | None:
        """Default per-item deadline: the longest of this reward's and its parts' defaults."""
        values = [self.default_timeout_s] + [p.reward.timeout_for(p.config) for p in self.parts(config)]
        present = [v for v in values if v is not None]
        return max(present) if present else None

    def deadline_bounds_wall_time(self, config: ConfigT) -> bool:
        """Whether the per-item deadline bounds the wall-clock time an item's scoring takes from the
        call (a model call: its deadline runs from the call, ``model_backed.deadline_of``) rather than
        its compute (a CPU worker's, however long the item waited for one) or nothing (the code reward,
        bounded by its own limits). A reward built on others does when all of its parts do. The serving
        layer relies on it for an item it waited for while another request scored it (single flight):
        when its deadline has passed, scoring it would have been cut off too."""
        parts = self.parts(config)
        return bool(parts) and all(p.reward.deadline_bounds_wall_time(p.config) for p in parts)

    async def start(self) -> None:
        """Acquire resources (models, clients); called once in the app's lifespan."""

    async def close(self) -> None:
        """Release what :meth:`start` acquired."""

    def ready(self) -> dict[str, Any]:
        """A readiness check for ``/ready``; ``{"ok": True}`` unless the reward depends on something."""
        return {"ok": True}

    @abstractmethod
    async def score(self, items: Sequence[ScoreItem], config: ConfigT, ctx: ScoreContext) -> list[Outcome]:
        """Score a batch; return exactly one Outcome per item, in order."""


def unavailable_parts(reward: Reward[Any], config: Any, where: str = "reward") -> list[tuple[str, str, str]]:
    """``(where, reward name, why)`` for this reward and every part below it, at any depth, that cannot
    score here: what ``POST /v1/rewards/check`` answers, so a trainer can refuse a spec whose composite
    holds a ``code`` component on a host without a sandbox before it trains on invalid items."""
    why = reward.unavailable_for(config)
    found = [(where, reward.name, why)] if why else []
    for p in reward.parts(config):
        # a part's ``where`` is relative to its owner ("reward.config.verifier"): re-base it onto ours
        found += unavailable_parts(p.reward, p.config, where + p.where.removeprefix("reward"))
    return found


_REGISTRY: dict[str, type[Reward[Any]]] = {}

R = TypeVar("R", bound=type[Reward[Any]])


def register(cls: R) -> R:
    """Class decorator adding a reward kind to the registry (a duplicate name is a bug)."""
    name = cls.name
    if name in _REGISTRY and _REGISTRY[name] is not cls:
        raise KeyError(f"reward {name!r} is already registered by {_REGISTRY[name].__module__}")
    _REGISTRY[name] = cls
    return cls


def registered() -> dict[str, type[Reward[Any]]]:
    """All registered reward classes, by name (importing ``rewardhub.rewards`` registers the built-ins)."""
    return dict(_REGISTRY)


class RewardRegistry:
    """The instances of every reward kind, created once per service process in the lifespan."""

    def __init__(self, runtime: Runtime, classes: dict[str, type[Reward[Any]]] | None = None):
        classes = registered() if classes is None else classes
        self._rewards: dict[str, Reward[Any]] = {name: cls(runtime) for name, cls in sorted(classes.items())}

    def get(self, name: str) -> Reward[Any]:
        try:
            return self._rewards[name]
        except KeyError:
            known = ", ".join(self._rewards)
            raise UnknownReward(f"unknown reward {name!r}; known rewards: {known}", param="reward") from None

    def names(self) -> list[str]:
        return list(self._rewards)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._rewards.values())

    async def start(self) -> None:
        for reward in self._rewards.values():
            await reward.start()

    async def close(self) -> None:
        for reward in self._rewards.values():
            await reward.close()
