"""The client's job calls: cancel_job and list_jobs, against the real service (async, in process) and on the
wire (sync, httpx.MockTransport)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx
import pytest

from rewardhub_client import (
    AsyncRewardClient,
    Conflict,
    JobList,
    JobStatus,
    NotConfigured,
    NotFound,
    RetryPolicy,
    RewardClient,
    ServerError,
    ServiceUnavailable,
)
from waiting import until

SLOW = [{"response": "\\boxed{2^{2^{2^{2^{2^{2}}}}}}", "reference": "4"}]  # holds its slot until cancelled
QUICK = [{"id": "x", "response": "\\boxed{4}", "reference": "4"}]


async def test_async_client_cancels_and_lists_its_jobs(
    make_app: Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]],
) -> None:
    async with make_app(api_keys="key-a,key-b", job_concurrency=1) as app:
        transport = httpx.ASGITransport(app=app.app)  # type: ignore[attr-defined]
        runner = app.app.state.jobs  # type: ignore[attr-defined]
        async with (
            AsyncRewardClient("http://rewardhub.test", api_key="key-a", transport=transport) as a,
            AsyncRewardClient("http://rewardhub.test", api_key="key-b", transport=transport) as b,
        ):
            slow = await a.submit_job(SLOW, "math", options={"timeout_s": 10, "use_cache": False})
            await until(lambda: slow.job_id in runner._scoring, "the slow job never started")
            quick = await a.submit_job(QUICK, "math")
            listed = await a.list_jobs()
            assert isinstance(listed, JobList) and not listed.has_more
            assert [j.job_id for j in listed.data] == [quick.job_id, slow.job_id]
            assert [j.status for j in listed.data] == ["queued", "running"]
            assert (await a.list_jobs(status="running")).data[0].job_id == slow.job_id
            assert (await a.list_jobs(limit=1)).has_more
            assert (await b.list_jobs()).data == []
            with pytest.raises(NotFound):
                await b.cancel_job(slow.job_id)

            cancelled = await a.cancel_job(slow.job_id)
            assert isinstance(cancelled, JobStatus) and cancelled.status == "cancelled" and cancelled.done
            assert (await a.cancel_job(slow.job_id)).status == "cancelled"  # a retry is safe
            done = await a.wait_job(quick.job_id, timeout_s=30)
            assert done.status == "succeeded"
            with pytest.raises(Conflict, match="succeeded"):
                await a.cancel_job(quick.job_id)
            finished = (await a.list_jobs(status="cancelled")).data
            assert [j.job_id for j in finished] == [slow.job_id] and finished[0].done


def test_sync_client_sends_delete_and_the_list_query() -> None:
    seen: list[httpx.Request] = []
    job = {"job_id": "job_1", "status": "cancelled", "created_at": 1.0, "finished_at": 2.0, "items": 1}

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.method == "DELETE":
            return httpx.Response(200, json=job)
        return httpx.Response(200, json={"data": [job], "has_more": True})

    with RewardClient("http://svc", api_key="k", transport=httpx.MockTransport(handler)) as c:
        cancelled = c.cancel_job("job_1")
        listed = c.list_jobs(status="cancelled", limit=1)
        everything = c.list_jobs()
    assert cancelled.status == "cancelled" and cancelled.done and cancelled.finished_at == 2.0
    assert listed.has_more and listed.data[0].job_id == "job_1" and listed.data[0].done
    assert everything.data[0].status == "cancelled"
    assert [(r.method, r.url.path, dict(r.url.params)) for r in seen] == [
        ("DELETE", "/v1/jobs/job_1", {}),
        ("GET", "/v1/jobs", {"status": "cancelled", "limit": "1"}),
        ("GET", "/v1/jobs", {"limit": "20"}),
    ]
    assert all(r.headers["authorization"] == "Bearer k" for r in seen)


def test_a_finished_job_cannot_be_cancelled_from_the_sync_client() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        error: dict[str, Any] = {
            "message": "job 'job_1' has already succeeded",
            "type": "conflict",
            "param": "job_id",
            "code": 409,
        }
        return httpx.Response(409, json={"error": error})

    with RewardClient("http://svc", transport=httpx.MockTransport(handler)) as c, pytest.raises(Conflict):
        c.cancel_job("job_1")


async def test_jobs_the_deployment_cannot_run_are_not_configured_not_retried(
    make_app: Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]],
) -> None:
    # 501 not_configured (jobs under several workers without Redis) came back as a bare ServerError, which
    # a caller could not tell from a 500 bug; it is its own class now, still a ServerError, and not retried.
    async with make_app(workers=2) as app:
        asgi = httpx.ASGITransport(app=app.app)  # type: ignore[attr-defined]
        sent: list[str] = []

        class Counted(httpx.AsyncBaseTransport):
            async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
                sent.append(request.url.path)
                return await asgi.handle_async_request(request)

        async with AsyncRewardClient("http://rewardhub.test", transport=Counted()) as c:
            with pytest.raises(NotConfigured, match="REWARDHUB_REDIS_URL") as info:
                await c.submit_job(QUICK, "exact_match")
    assert isinstance(info.value, ServerError) and info.value.status_code == 501
    assert info.value.error_type == "not_configured"
    assert sent == ["/v1/jobs"]


async def test_a_job_id_is_one_path_segment_whatever_it_holds() -> None:
    """job() and cancel_job() put the id into the URL as written: "a/b?c#d" asked for job "a" with a query
    string (or another route entirely, "../.."). The id is one percent-encoded path segment now."""
    seen: list[tuple[str, bytes]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.url.raw_path))
        error = {"message": "no such job", "type": "not_found", "param": "job_id", "code": 404}
        return httpx.Response(404, json={"error": error})

    odd = "a/b?c#d ../%"
    want = b"/v1/jobs/a%2Fb%3Fc%23d%20..%2F%25"
    with RewardClient("http://svc", transport=httpx.MockTransport(handler)) as c:
        for call in (c.job, c.cancel_job):
            with pytest.raises(NotFound):
                call(odd)
    async with AsyncRewardClient("http://svc", transport=httpx.MockTransport(handler)) as ac:
        for acall in (ac.job, ac.cancel_job):
            with pytest.raises(NotFound):
                await acall(odd)
    assert seen == [("GET", want), ("DELETE", want)] * 2


@pytest.mark.timeout(60)
@pytest.mark.parametrize("asynchronous", [False, True])
def test_wait_job_does_not_retry_or_read_past_its_deadline(asynchronous: bool) -> None:
    """wait_job(timeout_s=...) polled through the client's retries and timeout, neither bounded by its
    deadline: a poll answered 503 with Retry-After was slept on and sent again (up to max_retries times, each
    Retry-After up to two minutes), and a poll the service did not answer waited out the client's 120 s read
    timeout, so a caller asking for 1 s blocked for minutes. A retry that would start past the deadline is
    not made (the error is raised), and each poll reads for at most the time left."""
    job = {"job_id": "job_1", "status": "running", "created_at": 1.0, "items": 1}
    polls: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        polls.append(request)
        if len(polls) == 1:
            error = {"message": "shutting down", "type": "unavailable", "param": None, "code": 503}
            return httpx.Response(503, json={"error": error}, headers={"Retry-After": "3"})
        return httpx.Response(200, json=job)

    retry = RetryPolicy(max_retries=2, backoff_s=0.001, max_backoff_s=0.01)
    with pytest.raises(ServiceUnavailable):
        if asynchronous:

            async def run() -> None:
                transport = httpx.MockTransport(handler)
                async with AsyncRewardClient("http://svc", transport=transport, retry=retry) as c:
                    await c.wait_job("job_1", timeout_s=1.0)

            asyncio.run(run())
        else:
            with RewardClient("http://svc", transport=httpx.MockTransport(handler), retry=retry) as c:
                c.wait_job("job_1", timeout_s=1.0)
    assert len(polls) == 1  # the retry, 3 s on, would have started past the 1 s deadline
    assert all(0 < t <= 1.0 for t in polls[0].extensions["timeout"].values())


@pytest.mark.parametrize("asynchronous", [False, True])
def test_wait_job_still_retries_within_its_deadline(asynchronous: bool) -> None:
    statuses = iter(["running", "succeeded"])
    polls: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        polls.append(request.extensions["timeout"]["read"])
        if len(polls) == 1:
            error = {"message": "full", "type": "overloaded", "param": None, "code": 429}
            return httpx.Response(429, json={"error": error}, headers={"Retry-After": "0"})
        job = {"job_id": "job_1", "status": next(statuses), "created_at": 1.0, "items": 1}
        return httpx.Response(200, json=job)

    retry = RetryPolicy(max_retries=2, backoff_s=0.001, max_backoff_s=0.01)
    if asynchronous:

        async def run() -> JobStatus:
            transport = httpx.MockTransport(handler)
            async with AsyncRewardClient("http://svc", transport=transport, retry=retry) as c:
                return await c.wait_job("job_1", timeout_s=60.0, poll_s=0.001)

        done = asyncio.run(run())
    else:
        with RewardClient("http://svc", transport=httpx.MockTransport(handler), retry=retry) as c:
            done = c.wait_job("job_1", timeout_s=60.0, poll_s=0.001)
    assert done.status == "succeeded" and len(polls) == 3
    # each attempt, a retry as a later poll, reads for at most the time left then, not the first's
    assert polls[0] > polls[1] > polls[2]


def test_a_job_state_this_client_does_not_know_is_read_not_refused() -> None:
    """The job states were a closed list: a state a newer service adds (say "paused") made every read of
    the job a ProtocolError, so wait_job could never finish or time out with the job's state in its
    message. It is read as the string it is, and such a job is not done."""
    body = '{"job_id": "job_1", "status": "paused", "created_at": 1.0, "items": 3}'
    status = JobStatus.model_validate_json(body)
    assert status.status == "paused" and not status.done
    assert JobStatus.model_validate_json(body.replace("paused", "succeeded")).done
