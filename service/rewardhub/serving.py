"""The scoring service: one request's way from items to results.

1. check the limits (items per request, bytes per field);
2. resolve each item's reward spec through the registry and validate its config (once per distinct spec);
3. look every cacheable item up at once (one ``MGET``);
4. deduplicate the misses (a GRPO group often holds identical responses; a cacheable item another
   request of this process is scoring now is awaited, not scored again), claim the rest in a cache
   shared between processes (Redis: one more round trip, for requests with misses only) and await an
   item another process holds as well, group them by reward and await each reward's batch concurrently;
5. write the new valid results back (one pipelined ``SET``, which releases the claims after them) and
   assemble the results in request order, with per-request metrics.

Single flight is two-level: within a process the requests wait for each other in memory (``_inflight``,
:meth:`ScoringService._await_others`), and the process's one request scoring an item holds the item's
claim in Redis for all of them (cache.py), where the requests of other processes wait for it
(:meth:`ScoringService._await_elsewhere`); a trainer's retry of a batch still being scored scores
nothing again, whichever worker it lands on.

Invalid results are never cached: a timeout or a backend failure is a property of this moment, not of
the item.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import Awaitable, Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
import structlog

from rewardhub import jsonutil
from rewardhub.aio import gather_all
from rewardhub.cache import Cache, Claims, config_digest, item_key
from rewardhub.config import Settings
from rewardhub.errors import InvalidRequest, LimitExceeded, UnknownReward
from rewardhub.groups import (
    GroupClaim,
    check_group_size,
    claim_groups,
    enforce_whole_groups,
    group_indices,
)
from rewardhub.metrics import Metrics
from rewardhub.protocol import (
    INVALID_REASONS,
    Reason,
    RewardCheckResponse,
    RewardSpec,
    ScoreItem,
    ScoreRequest,
    UnavailablePart,
)
from rewardhub.request_metrics import request_metrics
from rewardhub.rewards.base import Outcome, Reward, RewardRegistry, ScoreContext, unavailable_parts
from rewardhub.security import ANONYMOUS_KEY_ID
from rewardhub.shadow import attach as attach_shadow
from rewardhub.stats import LiveStats

__all__ = ["ScoringService"]

log = structlog.get_logger("rewardhub.serving")


@dataclass(slots=True)
class _Plan:
    """All items of one request that use the same reward with the same config."""

    reward: Reward[Any]
    config: Any
    effective: dict[str, Any]  # the config as the cache key hashes it (Reward.cache_config)
    config_json: bytes
    deterministic: bool  # a pure function of its inputs: keyed, deduplicated, cacheable
    use_cache: bool  # read and write the cache for this plan
    version: str  # the reward's version for this config (a composite's includes its parts')
    reads: tuple[str, ...]  # the item fields in its cache key (a composite's: all its parts read)
    groups: bool  # a group reward: its groups must come whole (groups.py)
    timeout_s: float | None  # the reward's default per-item deadline for this config, if it has one
    wall_clock: bool  # that deadline bounds an item's wall-clock time from the call (a model call's)
    indices: list[int] = field(default_factory=list)


@dataclass(slots=True)
class _Request:
    """What one request's scoring shares between its steps (:meth:`ScoringService._score`): the
    helpers that score its misses, claim them across processes and wait for the items other requests
    or processes are scoring all read and fill the same per-item lists (in request order), which were
    passed to each of them one by one, eight to ten parameters a call."""

    items: Sequence[ScoreItem]
    ids: list[str]  # each item's id in the results (its own, else its index)
    keys: list[str | None]  # each item's cache key (None: not deterministic, never deduplicated)
    per_item: list[_Plan]
    plan_by_id: dict[int, _Plan]  # id(plan) -> plan, for the todo lists (id(plan) -> item indices)
    ctx: ScoreContext
    t0: float  # when the request started (time.perf_counter()): the items' deadlines count from then
    results: list[dict[str, Any] | None]  # None until answered
    to_write: list[tuple[str, bytes]] = field(default_factory=list)  # new results the cache may hold
    # this request's claims in a cache shared between processes (single flight across them); taken
    # at the first item it owns, released with the write of its results
    claims: Claims | None = None


# The plans of one request, each under its spec as written (("spec", name, canonical raw config)) and
# under its validated config (("config", name, Reward.cache_config's canonical JSON)).
_Plans = dict[tuple[str, str, bytes], _Plan]


def _refuse_split_group(req: ScoreRequest, picked: Sequence[int], shadow: str) -> None:
    """422 at ``shadow.rewards`` for a group some of whose items ``shadow.rewards`` picks and others not."""
    chosen = set(picked)
    for gid, idx in group_indices(req.items).items():
        inside = [i for i in idx if i in chosen]
        if inside and len(inside) < len(idx):
            out = next(i for i in idx if i not in chosen)
            raise InvalidRequest(
                f"group {gid!r} is split by shadow.rewards: item {inside[0]} is shadowed and item {out} "
                f"(reward {_item_reward(req, out)!r}) is not, and the shadow reward {shadow!r} scores a "
                "group whole; name both items' rewards in shadow.rewards, or shadow with a reward that "
                "scores items alone",
                param="shadow.rewards",
            )


def _item_reward(req: ScoreRequest, i: int) -> str | None:
    spec = req.items[i].reward or req.reward
    return spec if isinstance(spec, str) or spec is None else spec.name


def _same_identity(plan: _Plan) -> bool:
    """Whether the reward's version (and with it the cache key) is still the one the plan's keys were
    computed with, and the reward still cacheable. A model backend re-learns which weights it serves on
    a call (RemoteBackend.learn_served), so a judge redeployed from another checkpoint is learned while
    the request runs, after its keys were computed: its results, or those of calls beside it, may be
    the new weights' or the old ones', and are stored under neither key (served, not cached)."""
    return plan.reward.is_cacheable(plan.config) and plan.reward.version_for(plan.config) == plan.version


class ScoringService:
    def __init__(
        self,
        settings: Settings,
        registry: RewardRegistry,
        cache: Cache,
        metrics: Metrics,
        stats: LiveStats | None = None,
    ):
        self.settings = settings
        self.registry = registry
        self.cache = cache
        self.metrics = metrics
        self.stats = stats
        # cache key -> what a request scoring that item now will share (None: nothing, score it yourself)
        self._inflight: dict[str, _Claim] = {}
        # items of this process's requests waiting now for another request's result (single flight),
        # rewardhub_queue_depth{pool="single_flight"}: how much of a retry's work is being absorbed
        self.waiting = 0
        self._background: set[asyncio.Future[None]] = set()  # claims released after a failed request
        metrics.watch(metrics.queue_depth.labels("single_flight"), lambda: self.waiting)

    # --- limits -------------------------------------------------------------------------------
    def check_limits(self, req: ScoreRequest, max_items: int | None = None) -> None:
        """The request's limits (items, bytes per field, group size), the part of :meth:`validate` that
        does not look at reward specs."""
        s = self.settings
        n = len(req.items)
        if n == 0:
            raise InvalidRequest("items: at least one item is required", param="items")
        limit_items = max_items or s.max_items
        if n > limit_items:
            raise LimitExceeded(
                f"items: {n} items exceed the limit of {limit_items} per request "
                f"(setting REWARDHUB_MAX_ITEMS); split the batch or use /v1/jobs",
                param="items",
            )
        limit = s.max_field_bytes
        for i, item in enumerate(req.items):
            for name in ("response", "prompt", "reference"):
                value = getattr(item, name)
                if value is None:
                    continue
                size = _size_bytes(value, limit)
                if size > limit:
                    raise LimitExceeded(
                        f"items.{i}.{name}: {size} bytes exceed the limit of {limit} bytes per field "
                        f"(setting REWARDHUB_MAX_FIELD_BYTES)",
                        param=f"items.{i}.{name}",
                    )
        if req.options.group_size is not None:
            check_group_size(req.items, req.options.group_size)

    # --- resolution ---------------------------------------------------------------------------
    def _plan_for(self, spec: str | RewardSpec, use_cache: bool, plans: _Plans, where: str) -> _Plan:
        name, raw = (spec, {}) if isinstance(spec, str) else (spec.name, spec.config)
        key = ("spec", name, jsonutil.canonical(raw))
        plan = plans.get(key)
        if plan is None:
            try:
                reward = self.registry.get(name)
                config = reward.parse_config(raw)
            except (InvalidRequest, UnknownReward) as exc:
                # The param is relative to the spec ("reward.config.x"): re-base it onto where the spec is.
                inner = exc.param or "reward"
                exc.param = (
                    where + inner[len("reward") :] if inner.startswith("reward") else f"{where}.{inner}"
                )
                raise
            effective = reward.cache_config(config)
            config_json = config_digest(effective)
            # One config written two ways (`{}` and its defaults spelled out, a part as "math" or as
            # {"name": "math"}) is one plan: its items one group for a group reward (two plans were
            # refused as a group split between two configs), one call to the reward.
            same = plans.get(("config", name, config_json))
            if same is not None:
                plans[key] = same
                return same
            deterministic = reward.is_cacheable(config)
            plan = _Plan(
                reward=reward,
                config=config,
                effective=effective,
                config_json=config_json,
                deterministic=deterministic,
                use_cache=deterministic and use_cache and self.settings.cache_enabled,
                version=reward.version_for(config),
                reads=reward.reads_for(config),
                groups=reward.uses_groups(config),
                timeout_s=reward.timeout_for(config),
                wall_clock=reward.deadline_bounds_wall_time(config),
            )
            plans[key] = plans[("config", name, config_json)] = plan
        return plan

    def _resolve(self, req: ScoreRequest) -> tuple[list[_Plan], list[_Plan]]:
        """The distinct plans and, per item, its plan."""
        plans: _Plans = {}
        use_cache = req.options.use_cache
        default = self._plan_for(req.reward, use_cache, plans, "reward") if req.reward is not None else None
        per_item: list[_Plan] = []
        for i, item in enumerate(req.items):
            if item.reward is not None:
                plan = self._plan_for(item.reward, use_cache, plans, f"items.{i}.reward")
            elif default is not None:
                plan = default
            else:
                raise InvalidRequest(
                    f"items.{i}.reward: no reward given; set `reward` on the request or on the item",
                    param=f"items.{i}.reward",
                )
            plan.indices.append(i)
            per_item.append(plan)
        return list({id(p): p for p in plans.values()}.values()), per_item  # (each under two keys)

    def dedupe_fields(self, spec: str | RewardSpec) -> tuple[str, ...] | None:
        """The item fields two items of this spec must share to be scored once in a request (the
        fields of their cache key), or None when its items are never deduplicated (a reward that is not
        a pure function of its inputs). A caller that splits a batch into several requests puts such
        items in one request by these fields (the compat routes' calls, compat/common.py)."""
        plan = self._plan_for(spec, False, {}, "reward")
        return plan.reads if plan.deterministic else None

    def check(self, spec: str | RewardSpec) -> RewardCheckResponse:
        """What scoring with this spec would do, without an item: the same resolution as :meth:`score`
        (so the same 404 and 422), plus every part at any depth that cannot score on this server."""
        plan = self._plan_for(spec, False, {}, "reward")
        missing = [
            UnavailablePart(where=where, reward=name, message=why)
            for where, name, why in unavailable_parts(plan.reward, plan.config)
        ]
        return RewardCheckResponse(
            name=plan.reward.name,
            version=plan.version,
            cacheable=plan.deterministic and self.settings.cache_enabled,
            reads=list(plan.reads),
            group_aware=plan.groups,
            timeout_s=self._default_deadline(plan),
            ok=not missing,
            unavailable=missing,
        )

    def _deadline(self, plan: _Plan, ctx: ScoreContext) -> float:
        """The per-item deadline this request's items of ``plan`` are scored under (as in _run_plan)."""
        return ctx.deadline_s if ctx.explicit_deadline else self._default_deadline(plan)

    def _default_deadline(self, plan: _Plan) -> float:
        """The per-item deadline :meth:`score` applies to this plan when the request sets no
        ``options.timeout_s``: the reward's own default (a model call's 60 s) or else
        ``REWARDHUB_ITEM_TIMEOUT_S``, never past ``REWARDHUB_MAX_ITEM_TIMEOUT_S``."""
        return self.settings.default_deadline(plan.timeout_s)

    def check_rewards(self, req: ScoreRequest) -> None:
        """Every item's reward spec (a reward this server has, a config it accepts), the part of
        :meth:`validate` that does not look at the request's limits: a caller that checks each item's
        limits anyway (compat/common.py) resolves each distinct spec once with this, not the limits twice."""
        self._resolve(req)
        if req.shadow is not None:
            self._resolve_shadow(req)

    def _resolve_shadow(self, req: ScoreRequest) -> ScoreRequest:
        """The request that scores ``req``'s shadowed items with its shadow reward (their own ``reward``
        dropped); its spec resolved, so that a bad shadow spec is the same 404 / 422 at ``shadow.reward``."""
        assert req.shadow is not None
        for i, name in enumerate(req.shadow.rewards or ()):
            try:  # a misspelt name would quietly shadow nothing
                self.registry.get(name)
            except UnknownReward as exc:
                exc.param = f"shadow.rewards.{i}"
                raise
        plan = self._plan_for(req.shadow.reward, False, {}, "shadow.reward")
        picked = req.shadowed()
        options = req.options
        if len(picked) < len(req.items):
            # Part of the request, which may hold part of a group (one mixing two rewards): the group size
            # is the request's, checked here on all its items, and a group reward as the shadow would score
            # the part as the group (and remember it so), so a group split by the pick is refused.
            if options.group_size is not None:
                check_group_size(req.items, options.group_size)
                options = options.model_copy(update={"group_size": None})
            if plan.groups:
                _refuse_split_group(req, picked, plan.reward.name)
        return ScoreRequest(
            reward=req.shadow.reward,
            items=[req.items[i].model_copy(update={"reward": None}) for i in picked],
            options=options,
        )

    def validate(self, req: ScoreRequest, *, max_items: int | None = None) -> None:
        """Everything that would make :meth:`score` reject the request, without scoring (for jobs)."""
        self.check_limits(req, max_items)
        self.check_rewards(req)

    # --- scoring ------------------------------------------------------------------------------
    async def score(
        self, req: ScoreRequest, *, max_items: int | None = None, tenant: str = ANONYMOUS_KEY_ID
    ) -> dict[str, Any]:
        """``tenant``: whose group ids these are (the caller's key id): the whole-group check remembers
        member sets per tenant, so two API keys' group "0" are two groups.

        With ``req.shadow`` the items are scored by the shadow reward too, concurrently, through the same
        path (cache, batching, single flight); its results are put beside the primary ones
        (:mod:`rewardhub.shadow`)."""
        if req.shadow is None:
            return (await self._score(req, max_items, tenant))[0]
        shadow_req = self._resolve_shadow(req)
        # the primary's spec checked too before either side starts: a bad one failing inside its task
        # would let the shadow's task run up to its first wait (its groups' fingerprints remembered)
        self._resolve(req)
        if shadow_req.items:
            (out, all_names), (shadow_out, _) = await gather_all(
                self._score(req, max_items, tenant), self._score(shadow_req, max_items, tenant)
            )
            shadow_results = shadow_out["results"]
        else:  # no item has one of ``shadow.rewards``
            out, all_names = await self._score(req, max_items, tenant)
            shadow_results = []
        picked = req.shadowed()
        for result in out["results"]:
            result["shadow"] = None  # an item left out of the shadow's set
        names = [all_names[i] for i in picked]
        summary, outcomes = attach_shadow(
            [req.items[i] for i in picked],
            [out["results"][i] for i in picked],
            shadow_results,
            req.shadow,
            names,
            include_details=req.options.include_details,
        )
        out["metrics"]["shadow"] = summary
        counter = self.metrics.shadow_items
        for name, kind in zip(names, outcomes, strict=True):
            counter.labels(name, summary["reward"], kind).inc()
        if self.stats is not None and names:
            self.stats.record_shadow(names, summary["reward"], outcomes)
        return out

    async def _score(
        self, req: ScoreRequest, max_items: int | None, tenant: str
    ) -> tuple[dict[str, Any], list[str]]:
        """:meth:`score` with one reward per item, and each item's reward name."""
        t0 = time.perf_counter()
        self.check_limits(req, max_items)
        plans, per_item = self._resolve(req)
        items = req.items
        n = len(items)
        await self._check_whole_groups(items, plans, tenant)
        ctx = ScoreContext(
            deadline_s=min(
                req.options.timeout_s or self.settings.item_timeout_s, self.settings.max_item_timeout_s
            ),
            include_details=req.options.include_details,
            explicit_deadline=req.options.timeout_s is not None,
        )
        ids = [item.id if item.id is not None else str(i) for i, item in enumerate(items)]

        # Keys of deterministic items, then one cache lookup for those that may use the cache.
        keys: list[str | None] = [None] * n
        lookup_idx: list[int] = []
        for plan in plans:
            if not plan.deterministic:
                continue
            r = plan.reward
            reads = plan.reads
            for i in plan.indices:
                item = items[i]
                keys[i] = item_key(r.name, plan.version, plan.config_json, [getattr(item, f) for f in reads])
            if plan.use_cache:
                lookup_idx.extend(plan.indices)
        lookup_idx.sort()
        t_lookup = time.perf_counter()
        values = await self.cache.get_many([keys[i] for i in lookup_idx]) if lookup_idx else []  # type: ignore[misc]
        lookup_ms = (time.perf_counter() - t_lookup) * 1000

        results: list[dict[str, Any] | None] = [None] * n
        unreadable = 0
        for i, raw in zip(lookup_idx, values, strict=True):
            if raw is not None:
                hit = _cached_result(raw)
                if hit is None:  # scored again, and its entry written over
                    unreadable += 1
                    continue
                results[i] = {"id": ids[i], **hit, "cached": True, "latency_ms": lookup_ms}
        if unreadable:
            log.warning("cache_entry_unreadable", entries=unreadable)

        # Misses: deduplicate identical (reward, config, fields) within the request, and, for the items
        # that may use the cache, with the concurrent requests of this process (single flight): an item
        # another request is scoring now is awaited, not scored twice (a client's retry after its timeout
        # of a batch still being scored, as OpenRLHF sends, doubled the work of a service already slow).
        # The items this request owns are then claimed across processes (_score_here, _claim).
        leaders: dict[str, int] = {}
        followers: list[tuple[int, int]] = []
        todo: dict[int, list[int]] = {}  # id(plan) -> item indices to compute
        plan_by_id: dict[int, _Plan] = {}
        inflight = self._inflight
        owned: dict[str, _Claim] = {}
        waiting: list[tuple[int, _Claim]] = []
        for plan in plans:
            plan_by_id[id(plan)] = plan
            for i in plan.indices:
                if results[i] is not None:
                    continue
                k = keys[i]
                if k is not None:
                    lead = leaders.get(k)
                    if lead is not None:
                        followers.append((i, lead))
                        continue
                    leaders[k] = i
                    if plan.use_cache:
                        other = inflight.get(k)
                        if other is not None:
                            waiting.append((i, other))
                            continue
                        owned[k] = inflight[k] = asyncio.get_running_loop().create_future()
                todo.setdefault(id(plan), []).append(i)

        rq = _Request(items, ids, keys, per_item, plan_by_id, ctx, t0, results)
        try:
            if waiting:
                await gather_all(self._score_here(rq, todo, owned), self._await_others(rq, waiting))
            else:
                await self._score_here(rq, todo, owned)
        except BaseException:
            claims = rq.claims
            if claims is not None and claims.keys:  # (nothing of it will be written)
                self._in_background(self.cache.release(claims))
            raise
        finally:
            # (_score_here releases them, but a task cancelled before it started never ran its finally:
            # a client gone in the same turn of the event loop left the claims waited for until each
            # waiter's deadline, for every later request of those items)
            self._release(owned)
        for i, lead in followers:
            d = dict(results[lead])  # type: ignore[arg-type]
            d["id"] = ids[i]
            results[i] = d

        claims = rq.claims
        if rq.to_write or (claims is not None and claims.keys):
            # the claims released after the results, in the same round trip: another process waiting
            # for an item sees its result before it sees the claim gone (a claim gone without a result,
            # the item taken over and scored again, is what an invalid result is left as)
            await self.cache.set_many(rq.to_write, claims)

        final: list[dict[str, Any]] = results  # type: ignore[assignment]
        reward_names = [p.reward.name for p in per_item]
        # before details are dropped: a PRM's ProcessBench metric reads its details.first_error
        metrics = request_metrics(items, final, per_item_reward=reward_names)
        if not ctx.include_details:
            for d in final:
                d["details"] = {}
        self._observe(plans, per_item, final)
        if self.stats is not None:
            self.stats.record(reward_names, final)
        metrics["deduplicated"] = len(followers)
        metrics["latency_ms"] = (time.perf_counter() - t0) * 1000
        metrics["cache"] = {"backend": self.cache.backend, "up": self.cache.up}
        return {"request_id": f"req_{uuid.uuid4().hex}", "results": final, "metrics": metrics}, reward_names

    async def _score_here(
        self, rq: _Request, todo: dict[int, list[int]], owned: dict[str, _Claim], since: float | None = None
    ) -> None:
        """Score ``todo`` in this request, handing each ``owned`` item's result to the requests waiting
        for it; failed or cancelled, it hands them None (one of them takes the item over). ``since``:
        the items' deadlines count from then (see :meth:`_run_plan`). An owned item another process
        holds (its claim in the shared cache) is waited for as that process scores it."""
        try:
            elsewhere: list[int] = []
            if owned:
                if rq.claims is None:  # (taken at the first item the request owns)
                    rq.claims = self.cache.new_claims()
                if rq.claims is not None:
                    todo, elsewhere = await self._claim(rq, todo, owned)
            if elsewhere:
                await gather_all(
                    self._compute(rq, todo, owned, since), self._await_elsewhere(rq, elsewhere, owned)
                )
            else:
                await self._compute(rq, todo, owned, since)
        finally:
            self._release(owned)

    def _release(self, owned: dict[str, _Claim]) -> None:
        """This request scores none of ``owned`` any more: the requests still waiting for one get None."""
        for k, fut in owned.items():
            if not fut.done():
                fut.set_result(None)
            if self._inflight.get(k) is fut:
                del self._inflight[k]

    def _in_background(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _read_claims(
        self, rq: _Request, idx: list[int], got: Sequence[bytes | bool], owned: dict[str, _Claim], ms: float
    ) -> tuple[list[int], list[int], list[int]]:
        """Read the shared cache's answer to a claim of items ``idx`` (:meth:`Cache.claim`, ``got``): the
        items this request scores (claimed: True; or the result there unreadable: scored here and
        written over, as a miss), those another process holds (False), and those answered from the
        cache (:meth:`_answer_cached`, with latency ``ms``): another process scored them since."""
        here: list[int] = []
        held: list[int] = []
        answered: list[int] = []
        for i, g in zip(idx, got, strict=True):
            if g is True:
                here.append(i)
            elif g is False:
                held.append(i)
            else:
                hit = _cached_result(g)
                if hit is None:
                    here.append(i)
                else:
                    self._answer_cached(rq, i, hit, owned, ms)
                    answered.append(i)
        return here, held, answered

    def _answer_cached(
        self, rq: _Request, i: int, hit: dict[str, Any], owned: dict[str, _Claim], latency_ms: float
    ) -> None:
        """Item ``i`` is in the cache now (another process scored it): its result, and the result of the
        requests of this process waiting for it."""
        rq.results[i] = {"id": rq.ids[i], **hit, "cached": True, "latency_ms": latency_ms}
        fut = owned.get(rq.keys[i])  # type: ignore[arg-type]
        if fut is not None and not fut.done():
            fut.set_result((hit, True, self._deadline(rq.per_item[i], rq.ctx)))

    async def _claim(
        self, rq: _Request, todo: dict[int, list[int]], owned: dict[str, _Claim]
    ) -> tuple[dict[int, list[int]], list[int]]:
        """Claim the ``owned`` items of ``todo`` in the shared cache (one round trip per 256 of them, made
        only by a request with misses): what is left to score here, and the items another process holds
        now. An item some other process wrote since this request looked it up is answered from the cache.
        With no claim to be had (Redis down, or refusing), everything is scored here, as without Redis."""
        claims, keys = rq.claims, rq.keys
        assert claims is not None
        mine = [i for idx in todo.values() for i in idx if keys[i] is not None and keys[i] in owned]
        if not mine:
            return todo, []
        t = time.perf_counter()
        got = await self.cache.claim([keys[i] for i in mine], claims)  # type: ignore[misc]
        if got is None:
            return todo, []
        ms = (time.perf_counter() - t) * 1000
        _, elsewhere, answered = self._read_claims(rq, mine, got, owned, ms)
        if not elsewhere and not answered:
            return todo, elsewhere
        gone = {*elsewhere, *answered}
        left = {pid: [i for i in idx if i not in gone] for pid, idx in todo.items()}
        return {pid: idx for pid, idx in left.items() if idx}, elsewhere

    async def _await_elsewhere(self, rq: _Request, elsewhere: list[int], owned: dict[str, _Claim]) -> None:
        """The items of this request another process is scoring (its claim in the shared cache): single
        flight across processes, under the rules of :meth:`_await_others`. This request keeps its own
        process's claim on them, so the other requests of this process wait for it, not on Redis.

        The cache is polled (one round trip for all the items, every 20 ms backing off to 250 ms), each
        poll taking the claim of an item whose claim is gone. An item is answered from the cache
        (``cached: true``) once its result is there. One whose claim went without a result (its holder
        failed, went away, crashed and let the claim lapse, or got a result the cache may not hold: an
        invalid one) is taken over, claimed by the poll itself so that exactly one waiter, of any
        process, scores it; it is scored under the time its deadline leaves. When an item's deadline,
        counted from this request's start, passes first, a reward whose deadline bounds wall-clock time
        answers ``timeout`` (the requests of this process waiting for it then decide for themselves),
        and any other scores the item here, unclaimed. Redis gone while waiting: the items are scored
        here, as without Redis."""
        claims, per_item, keys, t0 = rq.claims, rq.per_item, rq.keys, rq.t0
        assert claims is not None
        metric = self.metrics.single_flight_remote_waits
        watch = list(elsewhere)
        limits = {i: self._deadline(per_item[i], rq.ctx) for i in watch}
        scoring: set[asyncio.Future[None]] = set()
        t_wait = time.perf_counter()
        delay = _POLL_FIRST_S
        self.waiting += len(watch)
        try:
            while watch:
                now = time.perf_counter()
                cut: dict[int, list[int]] = {}
                for i in [i for i in watch if now - t0 >= limits[i]]:  # deadlines first
                    watch.remove(i)
                    self.waiting -= 1
                    plan = per_item[i]
                    metric.labels(plan.reward.name, "deadline").inc()
                    if plan.wall_clock:
                        rq.results[i] = _timed_out(plan, rq.ids[i], limits[i], (now - t_wait) * 1000)
                        k = keys[i]
                        assert k is not None
                        self._release({k: owned[k]})
                    else:
                        cut.setdefault(id(plan), []).append(i)
                if cut:
                    scoring.add(asyncio.ensure_future(self._compute(rq, cut, owned, None)))
                if watch:
                    got = await self.cache.claim([keys[i] for i in watch], claims)  # type: ignore[misc]
                    now = time.perf_counter()
                    # (Redis gone: every item taken over; an unreadable entry: scored here, written over)
                    here, watch, answered = self._read_claims(
                        rq, watch, got or [True] * len(watch), owned, (now - t_wait) * 1000
                    )
                    self.waiting -= len(here) + len(answered)
                    for i in answered:
                        metric.labels(per_item[i].reward.name, "cached").inc()
                    taken: dict[int, list[int]] = {}
                    for i in here:
                        plan = per_item[i]
                        metric.labels(plan.reward.name, "taken_over").inc()
                        taken.setdefault(id(plan), []).append(i)
                    if taken:
                        scoring.add(asyncio.ensure_future(self._compute(rq, taken, owned, t0)))
                for task in [task for task in scoring if task.done()]:
                    scoring.discard(task)
                    task.result()  # (a request-level error, a 429, fails the request)
                if watch:
                    first_due = min(t0 + limits[i] for i in watch) - time.perf_counter()
                    await asyncio.sleep(max(0.0, min(delay, first_due)))
                    delay = min(delay * 1.5, _POLL_LAST_S)
            if scoring:
                await gather_all(*scoring)
                scoring.clear()
        finally:
            self.waiting -= len(watch)
            await _cancel_all(scoring)

    async def _await_others(self, rq: _Request, waiting: list[tuple[int, _Claim]]) -> None:
        """The items of this request another request of this process is scoring (single flight): each
        gets that request's result when the cache could hold it, or when it is this moment's (invalid,
        a transient 0) and was scored under a deadline no shorter than this request's: an identical
        item of this request would get it too.

        Otherwise (the other request failed, was cancelled, or gave the item less time) exactly one of
        the requests waiting for the item takes it over, claiming it as its owner did, and the others
        wait for it in turn: each scoring them itself made N scorings for N waiters, the load single
        flight spares. Claims are taken at once (a waiter does not sit on a failed owner's item while
        another is still being waited for), and the items taken over at once are scored as one batch.

        A request must answer within its own per-item deadline, counted from its start, whatever the
        request it waits for was given (a judge's 60 s against its ``timeout_s``). When that deadline
        passes while it waits, what the cut means depends on the reward:

        * a deadline that bounds the item's wall-clock time from the call (a model call's,
          :meth:`~rewardhub.rewards.base.Reward.deadline_bounds_wall_time`): its own call, made from its
          start, would have been cut off at that moment too, so the item is answered ``timeout`` (invalid,
          never cached) at once, as the reward answers a call its deadline cut. Scoring it then, under its
          whole deadline again, took up to twice its ``timeout_s``. Such an item taken over is scored
          under the time its deadline leaves, and answered ``timeout`` when none is left;
        * any other deadline bounds an item's scoring, not a wait (a CPU batch gives each item its
          deadline of compute, the code reward bounds a program by its ``total_timeout_s`` alone): the
          request scores the item itself, as it would have without the other request."""
        per_item, keys, ids, results, t0 = rq.per_item, rq.keys, rq.ids, rq.results, rq.t0
        loop = asyncio.get_running_loop()
        inflight = self._inflight
        watch = dict(waiting)  # item -> the claim it waits for now
        limits = {i: self._deadline(per_item[i], rq.ctx) for i in watch}
        scoring: set[asyncio.Task[None]] = set()
        t_wait = time.perf_counter()
        self.waiting += len(watch)
        try:
            while True:
                now = time.perf_counter()
                taken: dict[int, list[int]] = {}
                claims: dict[str, _Claim] = {}
                cut: dict[int, list[int]] = {}
                for i, fut in list(watch.items()):
                    plan, limit = per_item[i], limits[i]
                    if fut.done():
                        got = fut.result()
                        if got is not None and (got[1] or got[2] >= limit):
                            del watch[i]
                            self.waiting -= 1
                            wait_ms = (now - t_wait) * 1000
                            results[i] = {"id": ids[i], **got[0], "cached": got[1], "latency_ms": wait_ms}
                            continue
                        k = keys[i]
                        assert k is not None  # (only a keyed item is waited for)
                        other = inflight.get(k)
                        if other is not None and other is not fut:  # another waiter took it over
                            watch[i] = other
                            continue
                        del watch[i]
                        self.waiting -= 1
                        if plan.wall_clock and now - t0 >= limit:  # (no time left to score it in)
                            results[i] = _timed_out(plan, ids[i], limit, (now - t_wait) * 1000)
                            continue
                        claims[k] = inflight[k] = loop.create_future()
                        taken.setdefault(id(plan), []).append(i)
                    elif now - t0 >= limit:  # its deadline came first
                        del watch[i]
                        self.waiting -= 1
                        if plan.wall_clock:
                            results[i] = _timed_out(plan, ids[i], limit, (now - t_wait) * 1000)
                        else:  # scored here, unclaimed
                            cut.setdefault(id(plan), []).append(i)
                for todo, owned, since in ((taken, claims, t0), (cut, {}, None)):
                    if todo:
                        scoring.add(asyncio.ensure_future(self._score_here(rq, todo, owned, since)))
                if not watch and not scoring:
                    return
                timeout = min(t0 + limits[i] for i in watch) - now if watch else None
                pending: set[asyncio.Future[Any]] = {*watch.values(), *scoring}
                done, _ = await asyncio.wait(pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                for task in scoring & done:
                    scoring.discard(task)
                    task.result()  # (a request-level error, a 429, fails the request)
        finally:  # (asyncio.wait cancels nothing: the claims waited for stay the others')
            self.waiting -= len(watch)
            await _cancel_all(scoring)

    async def _compute(
        self,
        rq: _Request,
        todo: dict[int, list[int]],
        owned: dict[str, _Claim] | None = None,
        since: float | None = None,
    ) -> None:
        """Score ``todo`` (id(plan) -> item indices) into ``rq.results``; what the cache may hold goes to
        ``rq.to_write``. The ``owned`` futures (cache key -> what the requests waiting for that item get)
        are resolved as soon as their item's batch ends, not when the slowest batch of the request
        does: a request waiting for a quick item gave up at its deadline and scored it again."""
        items, ids, keys, results, to_write, ctx = rq.items, rq.ids, rq.keys, rq.results, rq.to_write, rq.ctx

        async def one(pid: int, idx: list[int]) -> None:
            plan = rq.plan_by_id[pid]
            outcomes, batch_ms = await self._run_plan(plan, [items[i] for i in idx], ctx, since)
            r = plan.reward
            store = plan.use_cache and _same_identity(plan)
            deadline = self._deadline(plan, ctx)
            for i, o in zip(idx, outcomes, strict=True):
                stored = _stored(r, o, plan.version)
                key = keys[i]
                fut = owned.get(key) if owned is not None and key is not None else None
                if key is not None and (store or fut is not None):
                    raw = _cache_bytes(stored)
                    cacheable = store and stored["valid"] and not o.transient
                    if raw is not None and cacheable:
                        to_write.append((key, raw))
                    if fut is not None and not fut.done():  # (None: not as the cache would hold it)
                        fut.set_result(None if raw is None else (stored, cacheable, deadline))
                latency = o.latency_ms if o.latency_ms is not None else batch_ms
                results[i] = {"id": ids[i], **stored, "cached": False, "latency_ms": latency}

        if todo:
            await gather_all(*(one(pid, idx) for pid, idx in todo.items()))

    async def _check_whole_groups(self, items: Sequence[ScoreItem], plans: list[_Plan], tenant: str) -> None:
        """Group rewards need whole groups: reject a group split across requests (groups.py)."""
        claims: list[GroupClaim] = []
        for k, plan in enumerate(plans):
            if plan.groups:
                claims.extend(
                    claim_groups(plan.reward.name, items, plan.indices, plan.reads, k, tenant, plan.effective)
                )
        if claims:
            await enforce_whole_groups(self.cache, claims)

    async def _run_plan(
        self, plan: _Plan, items: Sequence[ScoreItem], ctx: ScoreContext, since: float | None = None
    ) -> tuple[list[Outcome], float]:
        """``since``: when the items' deadlines began (``time.perf_counter()``), for items taken over
        from another request after a wait: a reward whose deadline bounds wall-clock time from the call
        then gets only what is left of it, so the request still answers within its deadline."""
        r = plan.reward
        t0 = time.perf_counter()
        try:
            if not ctx.explicit_deadline:  # (what /v1/rewards/check reports as the spec's timeout_s)
                ctx = replace(ctx, deadline_s=self._default_deadline(plan))
            if since is not None and plan.wall_clock:
                ctx = replace(ctx, deadline_s=max(0.001, ctx.deadline_s - (t0 - since)))
            outcomes = await r.score(items, plan.config, ctx)
            if len(outcomes) != len(items):
                raise RuntimeError(
                    f"reward {r.name} returned {len(outcomes)} outcomes for {len(items)} items"
                )
        except Exception as exc:
            if _is_request_error(exc):
                raise
            log.exception("reward_failed", reward=r.name, items=len(items))
            outcomes = [
                Outcome.invalid(Reason.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}"[:300]) for _ in items
            ]
        batch_s = time.perf_counter() - t0
        self.metrics.reward_latency.labels(r.name).observe(batch_s)
        return outcomes, batch_s * 1000

    def _observe(self, plans: list[_Plan], per_item: list[_Plan], results: list[dict[str, Any]]) -> None:
        m = self.metrics
        for plan in plans:
            name = plan.reward.name
            m.items.labels(name).inc(len(plan.indices))
            if plan.use_cache:
                hits = sum(1 for i in plan.indices if results[i]["cached"])
                if hits:
                    m.cache_hits.labels(name).inc(hits)
                if len(plan.indices) - hits:
                    m.cache_misses.labels(name).inc(len(plan.indices) - hits)
        for plan, d in zip(per_item, results, strict=True):
            if not d["valid"]:
                m.invalid.labels(plan.reward.name, d["reason"] or "unknown").inc()


# How often an item another process is scoring is looked up in the cache: first after 20 ms, each wait
# half again as long as the one before, up to 250 ms.
_POLL_FIRST_S = 0.02
_POLL_LAST_S = 0.25

# What a request scoring an item gives the requests waiting for it: the result as the cache would hold
# it (read only: each waiter copies it into its own result), whether the cache may hold it, and the
# per-item deadline it was scored under.
_Shared = tuple[dict[str, Any], bool, float]
# A request's claim on an item it is scoring for the others: resolved with what it shares, or None.
_Claim = asyncio.Future[_Shared | None]


def _timed_out(plan: _Plan, item_id: str, limit: float, latency_ms: float) -> dict[str, Any]:
    """The result of an item whose deadline passed while it waited for another request scoring it."""
    o = Outcome.invalid(
        Reason.TIMEOUT,
        f"not scored within the item's {limit:g} s deadline (another request was scoring it)",
    )
    return {"id": item_id, **_stored(plan.reward, o, plan.version), "cached": False, "latency_ms": latency_ms}


async def _cancel_all(tasks: Collection[asyncio.Future[None]]) -> None:
    """Cancel a wait's scoring tasks still running (the request failed or went away) and let them end."""
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)


def _is_request_error(exc: Exception) -> bool:
    from rewardhub.errors import RewardHubError

    return isinstance(exc, RewardHubError)


def _stored(reward: Reward[Any], o: Outcome, version: str) -> dict[str, Any]:
    """The cacheable part of a result (everything but id, cached, latency)."""
    score = o.score
    reason = o.reason
    if score is not None:
        score = float(score)
        if not math.isfinite(score):
            score, reason = None, Reason.INTERNAL_ERROR
            o.details["message"] = "the reward produced a non-finite score"
    if score is None and (reason is None or reason not in INVALID_REASONS):
        # An item without a score must say why it could not be scored, with an invalid-class reason.
        reason = Reason.INTERNAL_ERROR
    return {
        "reward": reward.name,
        "score": score,
        "valid": score is not None,
        "reason": reason.value if reason is not None else None,
        "components": o.components,
        "details": o.details,
        "reward_version": version,
    }


_STORED_FIELDS = frozenset({"reward", "score", "valid", "reason", "components", "details", "reward_version"})


def _cached_result(raw: bytes) -> dict[str, Any] | None:
    """A cache entry read back as :func:`_stored` wrote it, or None (a miss) when it is not one: a value
    truncated or written over by something else sharing the Redis raised out of the request (a 500 for
    every request holding that item, for the entry's whole TTL) where the cache is only an accelerator."""
    try:
        d = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(d, dict) or d.keys() != _STORED_FIELDS:
        return None
    return d


def _cache_bytes(stored: dict[str, Any]) -> bytes | None:
    """A result as the cache holds it, or None when it cannot be held as it is: orjson refuses an integer
    beyond 64 bits (a caller's token count echoed in ``details``) and reads one back as a float, so such a
    result is answered (the response falls back to the standard library) but never cached."""
    try:
        return orjson.dumps(stored, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return None


def _size_bytes(value: Any, limit: int) -> int:
    """UTF-8 size of a field, computed only when it could exceed the limit."""
    if isinstance(value, str):
        if len(value) * 4 <= limit:
            return len(value)
        return len(value.encode("utf-8", "surrogatepass"))
    return len(jsonutil.dumps(value))
