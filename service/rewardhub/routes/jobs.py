"""``POST /v1/jobs``, ``GET /v1/jobs/{job_id}``, ``DELETE /v1/jobs/{job_id}`` (cancel) and ``GET /v1/jobs``
(the caller's jobs): asynchronous scoring with idempotency keys."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request

from rewardhub import jsonutil
from rewardhub.errors import ErrorResponse, NotConfigured, ServiceUnavailable
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

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorResponse},
    403: {"model": ErrorResponse},
    404: {"model": ErrorResponse, "description": "Unknown reward or job."},
    409: {"model": ErrorResponse, "description": "Idempotency-Key reused with a different body."},
    422: {"model": ErrorResponse},
    429: {"model": ErrorResponse, "description": "Too many jobs waiting; retry after Retry-After."},
    501: {"model": ErrorResponse, "description": "Several workers without Redis: no shared job store."},
    503: {"model": ErrorResponse, "description": "Job storage (Redis) unreachable."},
}


@router.post(
    "/jobs",
    status_code=202,
    response_model=JobStatus,
    responses={
        200: {"model": JobStatus, "description": "An existing job (repeated Idempotency-Key)."},
        **_ERRORS,
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
    "/jobs/{job_id}", response_model=JobStatus, responses=_ERRORS, summary="A job's status and result"
)
async def get_job(job_id: str, jobs: JobsDep, caller: CallerDep) -> JSONBytesResponse:
    return JSONBytesResponse(await jobs.get(job_id, caller))


@router.delete(
    "/jobs/{job_id}",
    response_model=JobStatus,
    responses={
        **_ERRORS,
        409: {"model": ErrorResponse, "description": "The job has already succeeded or failed."},
    },
    summary="Cancel a job",
    description=(
        "A queued job leaves the queue; a running job's scoring is stopped (on whichever replica runs it) "
        "and its result, should it still come, is dropped. Answers the job, `cancelled`, and the same for a "
        "job already cancelled (a retried DELETE). A job that has already succeeded or failed is a 409: its "
        "outcome stands. Another API key's job is a 404, as for GET."
    ),
)
async def cancel_job(job_id: str, jobs: JobsDep, caller: CallerDep) -> JSONBytesResponse:
    return JSONBytesResponse(await jobs.cancel(job_id, caller))


@router.get(
    "/jobs",
    response_model=JobList,
    responses=_ERRORS,
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
