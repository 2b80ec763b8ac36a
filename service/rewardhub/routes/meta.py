"""Catalog, health, readiness and metrics."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from rewardhub import __version__
from rewardhub.deps import ScoringDep
from rewardhub.errors import ErrorResponse
from rewardhub.protocol import (
    HealthResponse,
    ReadyResponse,
    RewardCheckRequest,
    RewardCheckResponse,
    RewardInfo,
    RewardsResponse,
)
from rewardhub.responses import JSONBytesResponse
from rewardhub.routes.body import body_doc, json_body
from rewardhub.security import CallerDep

router = APIRouter(tags=["meta"])

_AUTH_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorResponse, "description": "An API key is required."},
    403: {"model": ErrorResponse, "description": "The API key is not accepted."},
}


@router.get(
    "/v1/rewards",
    response_model=RewardsResponse,
    responses=_AUTH_ERRORS,
    summary="The reward catalog",
)
async def rewards(scoring: ScoringDep, _: CallerDep) -> RewardsResponse:
    return RewardsResponse(
        rewards=[
            RewardInfo(
                name=r.name,
                version=r.version,
                description=r.description,
                cacheable=r.cacheable,
                reads=list(r.reads),
                config_schema=r.config_model.model_json_schema(),
                unavailable=r.unavailable(),
            )
            for r in scoring.registry
        ]
    )


@router.post(
    "/v1/rewards/check",
    response_model=RewardCheckResponse,
    responses={
        **_AUTH_ERRORS,
        404: {"model": ErrorResponse, "description": "Unknown reward (here or as a part)."},
        422: {"model": ErrorResponse, "description": "Invalid config, as `POST /v1/score` would answer."},
    },
    openapi_extra=body_doc(RewardCheckRequest),
    summary="Check a reward spec without scoring",
    description=(
        "Resolves the spec exactly as `POST /v1/score` would (same 404 and 422) and says whether it and "
        "every reward it is built on (composite components, verifiers, a judge's rule) can score on this "
        "server. A trainer calls it before its first step, so a config that would make every item "
        "invalid fails at start, not as a run of steps with no reward signal."
    ),
)
async def check_reward(
    scoring: ScoringDep,
    _: CallerDep,
    body: Annotated[RewardCheckRequest, Depends(json_body(RewardCheckRequest))],
) -> RewardCheckResponse:
    return scoring.check(body.reward)


@router.get("/health", response_model=HealthResponse, summary="Liveness: the process answers")
async def health(request: Request) -> HealthResponse:
    state = request.app.state
    cache = getattr(state, "cache", None)
    sandbox = getattr(getattr(state, "runtime", None), "sandbox", None)
    return HealthResponse(
        status="ok",
        version=__version__,
        uptime_s=time.monotonic() - state.started_at,
        cache=cache.backend if cache is not None else "off",
        cache_up=cache.up if cache is not None else False,
        sandbox=sandbox.level if sandbox is not None else None,
    )


@router.get(
    "/ready",
    response_model=ReadyResponse,
    responses={503: {"model": ReadyResponse, "description": "Not ready; `checks` says what is missing."}},
    summary="Readiness: workers, cache and backends",
)
async def ready(request: Request) -> JSONBytesResponse:
    state = request.app.state
    checks: dict[str, dict[str, object]] = {}
    scoring = getattr(state, "scoring", None)
    if scoring is None:
        return JSONBytesResponse({"ready": False, "checks": {"startup": {"ok": False}}}, status_code=503)
    pool = state.runtime.cpu_pool
    st = pool.stats()
    checks["cpu_pool"] = {
        "ok": st.alive > 0,
        "alive": st.alive,
        "size": st.size,
        "queued_items": st.queued_items,
        "restarts": st.restarts,
    }
    cache = state.cache
    # A down Redis degrades caching but does not stop scoring: report it, don't fail readiness.
    # (asked now when it is thought up: an idle service sees no failed operation to tell it otherwise)
    up = cache.up and await cache.ping()
    checks["cache"] = {"ok": True, "backend": cache.backend, "up": up}
    # No isolation disables code rewards only (their items come back `sandbox_error`): report, don't fail.
    sandbox = getattr(state.runtime, "sandbox", None)
    if sandbox is not None:
        checks["sandbox"] = {"ok": True, **sandbox.stats()}
    # Configured model backends (unconfigured ones are simply absent; their rewards answer `unsupported`).
    models = getattr(state.runtime, "models", None)
    if models is not None:
        await models.recheck()  # (a remote model no longer listed is asked for: is it back?)
        for name, info in models.ready().items():
            checks[f"model:{name}"] = info
    for reward in scoring.registry:
        info = reward.ready()
        if info != {"ok": True}:
            checks[f"reward:{reward.name}"] = info
    ok = all(bool(c.get("ok")) for c in checks.values())
    return JSONBytesResponse({"ready": ok, "checks": checks}, status_code=200 if ok else 503)


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
async def metrics(request: Request) -> Response:
    return Response(request.app.state.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")
