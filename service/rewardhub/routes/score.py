"""``POST /v1/score``: score a batch of rollouts."""

from __future__ import annotations

from fastapi import APIRouter, Request

from rewardhub.deps import AdmissionDep, ScoringDep
from rewardhub.errors import ErrorResponse
from rewardhub.protocol import ScoreRequest, ScoreResponse
from rewardhub.responses import JSONBytesResponse
from rewardhub.security import CallerDep

router = APIRouter(prefix="/v1", tags=["scoring"])

_ERRORS: dict[int | str, dict[str, object]] = {
    401: {"model": ErrorResponse, "description": "An API key is required."},
    403: {"model": ErrorResponse, "description": "The API key is not accepted."},
    404: {"model": ErrorResponse, "description": "Unknown reward (the message lists the known names)."},
    413: {"model": ErrorResponse, "description": "Request body over REWARDHUB_MAX_REQUEST_BYTES."},
    422: {"model": ErrorResponse, "description": "Invalid request, bad reward config, or a size limit."},
    429: {"model": ErrorResponse, "description": "Queues are full; retry after the Retry-After header."},
}


@router.post(
    "/score",
    response_model=ScoreResponse,
    responses=_ERRORS,
    summary="Score rollouts",
    description=(
        "One result per item, same order. A failure on one item is data (`valid: false` with a "
        "`reason`), never an HTTP error; `0.0` means scored and wrong."
    ),
)
async def score(
    body: ScoreRequest, scoring: ScoringDep, admission: AdmissionDep, caller: CallerDep, request: Request
) -> JSONBytesResponse:
    async with admission.admit(caller, len(body.items)):
        out = await scoring.score(body)
    out["request_id"] = request.state.request_id
    return JSONBytesResponse(out)
