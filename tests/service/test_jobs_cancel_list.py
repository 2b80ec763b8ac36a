"""Cancelling jobs and listing an API key's jobs: the job stores (embedded and Redis), the runner, the routes."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from rewardhub.jobs import SUMMARY_FIELDS, JobStore, MemoryJobStore, RedisJobStore, body_digest

BODY = b'{"reward": "math", "items": [{"response": "1"}]}'


def new_job(job_id: str, caller: str = "key:a", created_at: float | None = None) -> dict[str, Any]:
    """A job record as the service writes it when it queues ``BODY`` for ``caller``."""
    return {
        "job_id": job_id,
        "status": "queued",
        "created_at": time.time() if created_at is None else created_at,
        "started_at": None,
        "finished_at": None,
        "items": 1,
        "result": None,
        "error": None,
        "body_sha256": body_digest(BODY),
        "caller": caller,
    }


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[JobStore]:
    """Each job store: the embedded one, and Redis (the tests' private redis-server) in a namespace of
    this test's own."""
    if request.param == "memory":
        yield MemoryJobStore(ttl_s=3600)
        return
    from redis.asyncio import Redis

    redis_server = request.getfixturevalue("redis_server")

    class Store(RedisJobStore):
        P = f"rh:test-cancel-{time.time_ns()}"

    redis = Redis.from_url(redis_server.url)
    try:
        yield Store(redis, ttl_s=3600)
    finally:
        keys = [k async for k in redis.scan_iter(match=f"{Store.P}:*")]
        if keys:
            await redis.delete(*keys)
        await redis.aclose()


async def test_a_store_cancels_a_waiting_job_and_drops_what_its_runner_writes_later(store: JobStore) -> None:
    """A waiting job is written cancelled as its last write (out of the pending index, its body gone);
    cancelling it again answers the same record; a runner that still had it (scoring it on another
    replica) writes nothing over it, neither "running" nor its result."""
    job, created = await store.create(new_job("job_w"), BODY, "key:a:idem-w")
    assert created
    cancelled = await store.cancel("job_w", 1000.0)
    assert cancelled is not None and cancelled["status"] == "cancelled" and cancelled["finished_at"] == 1000.0
    assert "job_w" not in await store.pending() and await store.body("job_w") is None
    again = await store.cancel("job_w", 2000.0)
    assert again is not None and again["status"] == "cancelled" and again["finished_at"] == 1000.0
    late = {**job, "status": "succeeded", "finished_at": time.time(), "result": {"results": []}}
    assert await store.save({**job, "status": "running", "started_at": time.time()}) is False
    assert await store.save(late, done=True) is False
    kept = await store.get("job_w")
    assert kept is not None and kept["status"] == "cancelled" and kept["result"] is None
    # The Idempotency-Key still names the job: a retry of its submission answers the cancelled job.
    found = await store.find("key:a:idem-w", body_digest(BODY))
    assert found is not None and found["job_id"] == "job_w"
    if isinstance(store, RedisJobStore):  # kept the job TTL from the cancel, like a finished job
        for key in (store._k("job", "job_w"), store._k("job-sum", "job_w"), store._k("idem", "key:a:idem-w")):
            assert 0 < await store.r.ttl(key) <= 3600, key


async def test_a_store_cancels_a_running_job_but_not_a_finished_one(store: JobStore) -> None:
    job, _ = await store.create(new_job("job_r"), BODY, None)
    assert await store.claim("job_r", "runner-1")
    assert await store.save({**job, "status": "running", "started_at": time.time(), "starts": 1}) is True
    cancelled = await store.cancel("job_r", time.time())
    assert (
        cancelled is not None and cancelled["status"] == "cancelled" and cancelled["started_at"] is not None
    )
    assert await store.claim("job_r", "runner-2"), "the cancelled job's lease was kept"
    assert await store.save({**job, "status": "queued"}) is False  # a shutdown's hand-back: dropped too

    done, _ = await store.create(new_job("job_d"), BODY, None)
    result = {"results": [{"id": "x", "score": 1.0}]}
    assert await store.save({**done, "status": "succeeded", "finished_at": 5.0, "result": result}, done=True)
    finished = await store.cancel("job_d", time.time())
    assert finished is not None and finished["status"] == "succeeded" and finished["result"] == result
    assert (await store.get("job_d") or {}).get("status") == "succeeded"
    assert await store.cancel("job_unknown", time.time()) is None


async def test_a_store_lists_a_keys_own_jobs_newest_first_without_results(store: JobStore) -> None:
    for n in range(4):
        await store.create(new_job(f"job_a{n}", created_at=100.0 + n), BODY, None)
    await store.create(new_job("job_b0", caller="key:b", created_at=200.0), BODY, None)
    a1 = await store.get("job_a1") or {}
    result = {"results": [{"id": "x", "score": 1.0}]}
    await store.save({**a1, "status": "succeeded", "finished_at": 150.0, "result": result}, done=True)
    await store.cancel("job_a2", 160.0)

    jobs, more = await store.jobs_of("key:a", None, 20)
    assert [j["job_id"] for j in jobs] == ["job_a3", "job_a2", "job_a1", "job_a0"] and not more
    assert [j["status"] for j in jobs] == ["queued", "cancelled", "succeeded", "queued"]
    assert all(set(j) == set(SUMMARY_FIELDS) for j in jobs), jobs  # no result, no caller, no digest
    assert jobs[2]["finished_at"] == 150.0
    page, more = await store.jobs_of("key:a", None, 2)
    assert [j["job_id"] for j in page] == ["job_a3", "job_a2"] and more
    queued, more = await store.jobs_of("key:a", "queued", 1)
    assert [j["job_id"] for j in queued] == ["job_a3"] and more
    cancelled, more = await store.jobs_of("key:a", "cancelled", 20)
    assert [j["job_id"] for j in cancelled] == ["job_a2"] and not more
    theirs, _ = await store.jobs_of("key:b", None, 20)
    assert [j["job_id"] for j in theirs] == ["job_b0"]
    assert await store.jobs_of("key:nobody", None, 20) == ([], False)

    if isinstance(store, RedisJobStore):
        index = store._k("jobs-of", "key:a")
        assert 0 < await store.r.ttl(index) <= 3600  # the index expires with the jobs
        await store.r.delete(store._k("job", "job_a1"), store._k("job-sum", "job_a1"))  # expired
        jobs, _ = await store.jobs_of("key:a", None, 20)
        assert [j["job_id"] for j in jobs] == ["job_a3", "job_a2", "job_a0"]
        assert await store.r.zscore(index, "job_a1") is None  # dropped from the index as it was met
