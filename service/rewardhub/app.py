"""The FastAPI application factory and its lifespan.

The lifespan owns every resource: the CPU worker pool, the cache connection and the reward instances
are created before the app serves and closed after (in reverse order). ``create_app`` takes an optional
:class:`Settings` so tests and embedders never touch the environment.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import structlog
from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from redis.asyncio import Redis

from rewardhub import __version__
from rewardhub.admission import Admission
from rewardhub.aio import cancel_and_wait
from rewardhub.cache import Cache, MemoryCache, NullCache, RedisCache
from rewardhub.canaries import monitor as canary_monitor
from rewardhub.config import ConfigError, Settings, get_settings, parse_api_keys, parse_origins
from rewardhub.errors import install_error_handlers
from rewardhub.jobs import JOB_REDIS_TIMEOUT_S, JobRunner, JobStore, MemoryJobStore, RedisJobStore
from rewardhub.logging_setup import configure_logging
from rewardhub.metrics import Metrics
from rewardhub.middleware import (
    BodyLimitMiddleware,
    CancelOnDisconnectMiddleware,
    CrossSiteMiddleware,
    HeadAsGetMiddleware,
    RequestContextMiddleware,
    StartupFailureMiddleware,
)
from rewardhub.models import ModelHub
from rewardhub.rewards import load_builtin_rewards
from rewardhub.rewards.base import RewardRegistry, registered
from rewardhub.routes import canaries, compat, compat_sandboxfusion, dashboard, jobs, meta, score
from rewardhub.routes.body import document_bodies
from rewardhub.runtime import heap
from rewardhub.runtime.context import Runtime, build_cpu_pool
from rewardhub.sandbox import SandboxPool
from rewardhub.security import Authenticator
from rewardhub.serving import ScoringService
from rewardhub.stats import LiveStats

__all__ = ["build_cache", "create_app"]

log = structlog.get_logger("rewardhub")


async def _refresh_gauges(metrics: Metrics, every_s: float = 1.0) -> None:
    while True:
        metrics.refresh()
        await asyncio.sleep(every_s)


def build_cache(settings: Settings, metrics: Metrics) -> Cache:
    if not settings.cache_enabled:
        return NullCache()
    if settings.redis_url:
        return RedisCache(
            settings.redis_url,
            ttl_s=settings.cache_ttl_s,
            timeout_s=settings.redis_timeout_s,
            retry_interval_s=settings.redis_retry_interval_s,
            on_error=lambda op: metrics.cache_errors.labels(op).inc(),
            on_state=lambda up: metrics.cache_up.set(1 if up else 0),
        )
    return MemoryCache(settings.cache_max_entries, settings.cache_ttl_s, settings.cache_max_bytes)


def build_job_store(settings: Settings) -> JobStore:
    """Jobs live in REWARDHUB_JOB_REDIS_URL's Redis if set, else where the cache lives: Redis when
    configured, else in process. A Redis of their own, because the cache's is often sized for it and
    evicts (allkeys-lru), which could drop a waiting job's request body.

    In Redis on a client of their own: the cache's timeout (REWARDHUB_REDIS_TIMEOUT_S, 0.25 s) is sized
    for small entries, and a job's body and result are megabytes (the batches too large for /v1/score),
    which took longer than that to store or read. A Redis that does not take connections is still
    found down at once."""
    url = settings.job_redis_url or settings.redis_url
    if url:
        redis = Redis.from_url(
            url,
            socket_timeout=max(JOB_REDIS_TIMEOUT_S, settings.redis_timeout_s),
            socket_connect_timeout=settings.redis_timeout_s,
            retry_on_timeout=False,
            health_check_interval=0,
        )
        return RedisJobStore(redis, settings.job_ttl_s)
    return MemoryJobStore(settings.job_ttl_s, settings.job_max_bytes)


def _stop_serving(app: FastAPI) -> None:
    """First on the way out: requests arriving during shutdown get 503s, not a closing service."""
    app.state.scoring = None
    app.state.jobs = None


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    metrics: Metrics = app.state.metrics
    load_builtin_rewards()
    if settings.compat_default_reward not in registered():
        # (it started, and the compat endpoints answered every plain label 0.0, unknown_reward)
        raise ConfigError(
            f"REWARDHUB_COMPAT_DEFAULT_REWARD={settings.compat_default_reward!r}: no such reward "
            f"(one of: {', '.join(sorted(registered()))})"
        )

    # Each close is pushed as soon as its start succeeds, so a start-up that fails half way (a Redis URL
    # without a scheme, a reward that cannot start) still stops the model processes, CPU workers and
    # sandbox already running; they close in reverse order, the service's users before its resources.
    async with AsyncExitStack() as stack:
        # Configured models load first: a bad path fails the start (naming the setting) before any worker
        # process exists to clean up. See rewardhub.models.
        models = ModelHub.from_settings(settings, metrics)
        await models.start(metrics)
        stack.push_async_callback(models.close)

        pool = build_cpu_pool(settings, metrics)
        await asyncio.to_thread(pool.start)  # boots the forkserver (imports SymPy once)
        stack.push_async_callback(asyncio.to_thread, pool.close)
        metrics.watch(metrics.queue_depth.labels("cpu"), lambda: pool.stats().queued_items)

        # Probes bwrap with a real run; never raises (no isolation = code items are refused, says /health).
        sandbox = SandboxPool.from_settings(settings)
        await sandbox.start()
        stack.push_async_callback(sandbox.close)
        metrics.watch(metrics.queue_depth.labels("sandbox"), lambda: sandbox.stats()["waiting"])
        sandbox.on_slot_end = lambda cause: metrics.worker_restarts.labels("sandbox", cause).inc()

        cache = build_cache(settings, metrics)
        await cache.start()
        stack.push_async_callback(cache.close)
        metrics.cache_up.set(1 if cache.up else 0)

        runtime = Runtime(settings=settings, metrics=metrics, cpu_pool=pool, sandbox=sandbox, models=models)
        registry = RewardRegistry(runtime)
        runtime.registry = registry
        await registry.start()
        stack.push_async_callback(registry.close)

        scoring = ScoringService(settings, registry, cache, metrics, app.state.stats)
        job_store = build_job_store(settings)
        if isinstance(job_store, RedisJobStore):
            stack.push_async_callback(job_store.r.aclose)
        job_runner = JobRunner(
            job_store,
            scoring,
            app.state.admission,
            concurrency=settings.job_concurrency,
            queue_max=settings.job_queue_max,
            max_items=settings.job_max_items,
            queue_max_per_key=settings.job_queue_max_per_key,
        )
        await job_runner.start()
        stack.push_async_callback(job_runner.close)

        app.state.runtime = runtime
        app.state.cache = cache
        app.state.scoring = scoring
        app.state.jobs = job_runner
        stack.callback(_stop_serving, app)
        if not app.state.authenticator.enabled:
            log.warning(
                "api_open",
                hint="no API keys configured: anyone who can reach this port can use it; "
                "set REWARDHUB_API_KEYS to require keys",
            )
        log.info(
            "service_ready",
            version=__version__,
            cache=cache.backend,
            cache_up=cache.up,
            cpu_workers=settings.cpu_workers,
            sandbox=sandbox.level,
            models=models.names(),
            rewards=registry.names(),
        )
        specs = settings.canary_specs()
        if specs:
            for spec in specs:  # an unknown reward or a bad config stops the start, as a request's would
                scoring.check(spec)
            monitor = canary_monitor(scoring, specs, settings.canary_interval_s, metrics.multiprocess_dir)
            canaries = asyncio.create_task(monitor)
            stack.push_async_callback(cancel_and_wait, canaries)
        # With several workers a scrape reaches one of them; the others' gauges are as fresh as this task.
        if metrics.multiprocess:
            refresher = asyncio.create_task(_refresh_gauges(metrics))
            stack.callback(refresher.cancel)
        heap.settle()  # start-up's objects out of every later collection (rewardhub.runtime.heap)
        yield
    log.info("service_stopped")


def _telemetry(settings: Settings) -> dict[str, Any]:
    """FastAPI's ``telemetry`` argument (FastAPI >= 0.165; older versions have no native telemetry)."""
    if settings.otel or "telemetry" not in inspect.signature(FastAPI.__init__).parameters:
        return {}
    return {"telemetry": {"tracing": False, "metrics": False, "logs": False}}


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the ASGI app (``uvicorn --factory rewardhub.app:create_app``)."""
    settings = settings or get_settings()
    configure_logging(settings.log_level, settings.log_json)
    app = FastAPI(
        title="rewardhub",
        version=__version__,
        summary="Reward-as-a-service for RL post-training of language models.",
        description=(
            "Batched HTTP endpoints for rule verifiers, judges, reward models and calibration scorers. "
            "Every result carries `score` (null when the item could not be scored), `valid`, `reason`, "
            "`components`, `details`, `cached` and `reward_version`."
        ),
        lifespan=lifespan,
        **_telemetry(settings),
    )
    app.state.settings = settings
    app.state.metrics = Metrics()
    app.state.stats = LiveStats()
    app.state.started_at = time.monotonic()
    app.state.scoring = None
    app.state.jobs = None
    app.state.authenticator = Authenticator(parse_api_keys(settings.api_keys))
    app.state.admission = Admission(
        settings.max_inflight_items,
        settings.per_key_max_concurrency,
        app.state.metrics,
        rate_per_s=settings.per_key_rate_limit,
        burst=settings.per_key_rate_burst,
    )
    install_error_handlers(app)
    app.include_router(score.router)
    app.include_router(jobs.router)
    app.include_router(canaries.router)
    app.include_router(compat.router)
    app.include_router(compat.nemo_gym_alias_router)
    app.include_router(compat_sandboxfusion.router)
    app.include_router(compat_sandboxfusion.alias_router)
    app.include_router(meta.router)
    app.include_router(dashboard.router)
    document_bodies(app)
    # Outermost first: the request context sees every answer, including 413s from the body limit.
    app.add_middleware(HeadAsGetMiddleware)  # innermost: what is outside sees the method as sent
    origins = parse_origins(settings.allowed_origins)
    app.add_middleware(CrossSiteMiddleware, allowed=origins)
    if origins:  # a page on an allowed origin can send JSON (a preflight) and read the answer
        app.add_middleware(
            CORSMiddleware,
            allow_origins=sorted(origins),
            allow_methods=["*"],
            allow_headers=["*"],
            expose_headers=["Retry-After", "X-Request-ID"],
        )
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_request_bytes)
    app.add_middleware(CancelOnDisconnectMiddleware)  # outside the body limit: it sees the raw receive
    app.add_middleware(RequestContextMiddleware, metrics=app.state.metrics)
    app.add_middleware(StartupFailureMiddleware)  # lifespan only: a configuration error without traceback
    return app
