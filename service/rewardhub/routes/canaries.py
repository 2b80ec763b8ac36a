"""``POST /v1/canaries``: probe a reward with content-free "master key" responses (rewardhub.canaries)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from rewardhub.canaries import canary_request, run_canaries
from rewardhub.deps import get_admission, get_scoring
from rewardhub.errors import ErrorResponse
from rewardhub.protocol import CanaryRequest, CanaryResponse
from rewardhub.responses import JSONBytesResponse
from rewardhub.routes.body import body_doc, parse_body
from rewardhub.security import get_caller

router = APIRouter(prefix="/v1", tags=["scoring"])


@router.post(
    "/canaries",
    response_model=CanaryResponse,
    responses={
        401: {"model": ErrorResponse, "description": "An API key is required."},
        403: {"model": ErrorResponse, "description": "The API key is not accepted."},
        404: {"model": ErrorResponse, "description": "Unknown reward (the message lists the known names)."},
        422: {"model": ErrorResponse, "description": "Invalid request or reward config."},
        429: {"model": ErrorResponse, "description": "Queues are full; retry after the Retry-After header."},
    },
    openapi_extra=body_doc(CanaryRequest),
    summary="Probe a reward with reward-hacking canaries",
    description=(
        "Scores content-free responses (a lone ':', 'Thought process:', 'Solution', an injection, the "
        "question echoed, the first sentence of a real response...) against the items' questions and "
        "references, without the cache, and says how many pass: a reward an RL policy can hack."
    ),
)
async def canaries(request: Request) -> JSONBytesResponse:
    scoring = await get_scoring(request)
    caller = await get_caller(request)
    body = parse_body(CanaryRequest, await request.body())
    scoring.check(body.reward)  # 404 / 422 before any probe is queued
    prepared = canary_request(body)
    admission = await get_admission(request)
    async with admission.admit(caller, len(prepared[0])):
        summary = await run_canaries(scoring, body, tenant=caller.key_id, prepared=prepared)
    return JSONBytesResponse(summary)
