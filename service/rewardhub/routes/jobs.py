"""``POST /v1/jobs``, ``GET /v1/jobs/{job_id}``, ``DELETE /v1/jobs/{job_id}`` (cancel) and ``GET /v1/jobs``
(the caller's jobs): asynchronous scoring with idempotency keys."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Request

from rewardhub import jsonutil
from rewardhub.errors import (
    Conflict,
    Forbidden,
    InvalidRequest,
    NotConfigured,
    NotFound,
    Overloaded,
    PayloadTooLarge,
    ServiceUnavailable,
    Unauthorized,
    UnknownReward,
    error_responses,
)
from rewardhub.jobs import LIST_WINDOW, JobRunner
from rewardhub.protocol import JobList, JobState, JobStatus, ScoreRequest
from rewardhub.responses import JSONBytesResponse
from rewardhub.routes.body import body_doc, json_body
from rewardhub.routes.score import parse_score_request
from rewardhub.security import CallerDep

router = APIRouter(prefix="/v1", tags=["jobs"])


async def get_jobs(request: Request) -> JobRunner:
    runner: JobRunner | None = getattr(request.app.state, "jobs", None)
    if runner is None:
        raise ServiceUnavailable("the service is starting up or shutting down")
    settings = request.app.state.settings
    if settings.workers > 1 and not (settings.job_redis_url or settings.redis_url):
        # each worker would keep its own jobs: a poll reaching another worker (a new connection) would
        # answer 404 for a job that exists, now and then, which no client can tell from a lost job
        raise NotConfigured(
            f"jobs need one job store shared by the {settings.workers} workers: set REWARDHUB_REDIS_URL "
            "or REWARDHUB_JOB_REDIS_URL (or run one worker)"
        )
    return runner


JobsDep = Annotated[JobRunner, Depends(get_jobs)]

# What each route can answer besides its job (errors.error_responses: the statuses are the errors' own).
_ANY = (
    (Unauthorized, "An API key is required."),
    (Forbidden, "The API key is not accepted."),
    (NotConfigured, "Several workers without Redis: no shared job store."),
    (ServiceUnavailable, "Job storage (Redis) unreachable, or the service is starting or stopping."),
)
_NO_JOB = (NotFound, "No such job of this API key (unknown, or expired after REWARDHUB_JOB_TTL_S).")
_SUBMIT_ERRORS = error_responses(
    *_ANY,
    (UnknownReward, "Unknown reward (the message lists the known names)."),
    (Conflict, "Idempotency-Key reused with a different body."),
    (PayloadTooLarge, "Request body over REWARDHUB_MAX_REQUEST_BYTES."),
    (InvalidRequest, "Invalid request or reward config, or over REWARDHUB_JOB_MAX_ITEMS items."),
    (Overloaded, "Too many jobs waiting; retry after Retry-After."),
    (ServiceUnavailable, "Or the job of this Idempotency-Key is still being written: retry."),
)
_GET_ERRORS = error_responses(*_ANY, _NO_JOB)
_CANCEL_ERRORS = error_responses(*_ANY, _NO_JOB, (Conflict, "The job has already succeeded or failed."))
_LIST_ERRORS = error_responses(*_ANY, (InvalidRequest, "A `limit` out of 1-100, or an unknown `status`."))


def job_id_of(request: Request) -> str:
    """The ``{job_id}`` of the path, read here rather than declared as a parameter: FastAPI documents a 422
    (with a body this service never answers) for any route with a declared parameter, and nothing in a
    path is refused here (an unknown or malformed id is a 404). ``_JOB_ID`` documents the parameter."""
    job_id: str = request.path_params["job_id"]
    return job_id


JobIdDep = Annotated[str, Depends(job_id_of)]
_JOB_ID = {"parameters": [{"name": "job_id", "in": "path", "required": True, "schema": {"type": "string"}}]}


@router.post(
    "/jobs",
    status_code=202,
    response_model=JobStatus,
    responses={
        200: {"model": JobStatus, "description": "An existing job (repeated Idempotency-Key)."},
        **_SUBMIT_ERRORS,
    },
    openapi_extra=body_doc(ScoreRequest),
    summary="Submit a scoring job",
    description=(
        "Same body as POST /v1/score, read the same way. Answers 202 with the new job, or 200 with the "
        "existing job when the `Idempotency-Key` was already used with the same body (nothing is computed "
        "twice)."
    ),
)
async def submit_job(
    jobs: JobsDep,
    caller: CallerDep,
    body: Annotated[ScoreRequest, Depends(json_body(ScoreRequest))],
    idempotency_key: Annotated[str | None, Header(max_length=256)] = None,
) -> JSONBytesResponse:
    # The canonical form of the parsed body: the same request in other whitespace or key order is the same job.
    # (jsonutil.canonical keeps NaN and Infinity: model_dump_json writes them as null, and the job, which
    # is scored from this text, then scored a reference of NaN as one of null.)
    # (the body was read by /v1/score's parser, which refuses a lone surrogate: the text encodes)
    canonical = jsonutil.canonical(body.model_dump(mode="python"))
    # The job is scored from this text by /v1/score's parser: what that refuses (nesting deeper than it
    # reads, say) is refused now, not accepted and then failed as an internal error.
    parse_score_request(canonical)
    job, created = await jobs.submit(canonical, body, caller, idempotency_key)
    return JSONBytesResponse(
        job, status_code=202 if created else 200, headers={"location": f"/v1/jobs/{job['job_id']}"}
    )


@router.get(
    "/jobs/{job_id}",
    response_model=JobStatus,
    responses=_GET_ERRORS,
    openapi_extra=_JOB_ID,
    summary="A job's status and result",
)
async def get_job(job_id: JobIdDep, jobs: JobsDep, caller: CallerDep) -> JSONBytesResponse:
    return JSONBytesResponse(await jobs.get(job_id, caller))


@router.delete(
    "/jobs/{job_id}",
    response_model=JobStatus,
    responses=_CANCEL_ERRORS,
    openapi_extra=_JOB_ID,
    summary="Cancel a job",
    description=(
        "A queued job leaves the queue; a running job's scoring is stopped (on whichever replica runs it) "
        "and its result, should it still come, is dropped. Answers the job, `cancelled`, and the same for a "
        "job already cancelled (a retried DELETE). A job that has already succeeded or failed is a 409: its "
        "outcome stands. Another API key's job is a 404, as for GET."
    ),
)
async def cancel_job(job_id: JobIdDep, jobs: JobsDep, caller: CallerDep) -> JSONBytesResponse:
    return JSONBytesResponse(await jobs.cancel(job_id, caller))


@router.get(
    "/jobs",
    response_model=JobList,
    responses=_LIST_ERRORS,
    summary="The caller's jobs",
    description=(
        "The jobs of the calling API key, newest first, without their results (GET /v1/jobs/{job_id} "
        "has them), at most `limit`, of one `status` if given; `has_more` says whether more matched. "
        f"Looks through the key's {LIST_WINDOW:,} newest jobs that have not expired (REWARDHUB_JOB_TTL_S)."
    ),
)
async def list_jobs(
    jobs: JobsDep,
    caller: CallerDep,
    status: Annotated[JobState | None, Query(description="Only jobs in this state.")] = None,
    limit: Annotated[int, Query(ge=1, le=100, description="Most jobs to answer.")] = 20,
) -> JSONBytesResponse:
    return JSONBytesResponse(await jobs.jobs(caller, status, limit))
