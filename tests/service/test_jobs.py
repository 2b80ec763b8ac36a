"""Async jobs: results, idempotency, and no job lost across a restart (Redis)."""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

import httpx
import pytest

from rewardhub import jobs as jobs_module
from rewardhub.errors import ServiceUnavailable
from rewardhub.jobs import JobRunner, MemoryJobStore, RedisJobStore, body_digest
from waiting import until

BODY = {
    "reward": "math",
    "items": [
        {"id": "x", "response": "\\boxed{\\frac{3}{6}}", "reference": "0.5"},
        {"id": "y", "response": "\\boxed{3}", "reference": "4"},
    ],
}
TOWER = "2^{2^{2^{2^{2^{2}}}}}"


def items_scored(metrics_text: str, reward: str = "math") -> float:
    prefix = f'rewardhub_items_total{{reward="{reward}"}} '
    return sum(float(line[len(prefix) :]) for line in metrics_text.splitlines() if line.startswith(prefix))


async def wait_done(c: httpx.AsyncClient, job_id: str, timeout_s: float = 30) -> dict[str, Any]:
    for _ in range(int(timeout_s / 0.05)):
        job: dict[str, Any] = (await c.get(f"/v1/jobs/{job_id}")).json()
        if job["status"] in ("succeeded", "failed"):
            return job
        await asyncio.sleep(0.05)
    raise AssertionError(f"job {job_id} not done: {job}")


async def test_job_runs_and_returns_the_score_response(client: httpx.AsyncClient) -> None:
    resp = await client.post("/v1/jobs", json=BODY)
    assert resp.status_code == 202, resp.text
    job = resp.json()
    assert job["status"] == "queued" and job["items"] == 2
    assert resp.headers["location"] == f"/v1/jobs/{job['job_id']}"
    done = await wait_done(client, job["job_id"])
    assert done["status"] == "succeeded"
    assert [r["score"] for r in done["result"]["results"]] == [1.0, 0.0]
    assert done["finished_at"] >= done["started_at"] >= done["created_at"]


async def test_repeated_idempotency_key_computes_once(client: httpx.AsyncClient) -> None:
    headers = {"Idempotency-Key": "once-123"}
    body = {**BODY, "options": {"use_cache": False}}
    first = await client.post("/v1/jobs", json=body, headers=headers)
    second = await client.post("/v1/jobs", json=body, headers=headers)
    assert first.status_code == 202 and second.status_code == 200
    assert first.json()["job_id"] == second.json()["job_id"]
    await wait_done(client, first.json()["job_id"])
    scored = items_scored((await client.get("/metrics")).text)
    runner = client.app.state.jobs  # type: ignore[attr-defined]
    before = asyncio.all_tasks()
    third = await client.post("/v1/jobs", json=body, headers=headers)
    assert third.json()["job_id"] == first.json()["job_id"] and third.json()["status"] == "succeeded"
    # Nothing queued, running or started for the repeat: work it set off in the runner's queue or in a
    # task of its own is waited for to its end (a fixed 0.3 s wait could end before a slow host had done
    # it, and passed); then the items counter must not have moved: no scoring happened.
    await until(
        lambda: not runner._queued and not asyncio.all_tasks() - before,
        "work set off by the repeat never ended",
    )
    assert items_scored((await client.get("/metrics")).text) == scored
    conflict = await client.post("/v1/jobs", json={**body, "items": body["items"][:1]}, headers=headers)
    assert conflict.status_code == 409 and conflict.json()["error"]["type"] == "conflict"


async def test_job_validation_fails_fast(client: httpx.AsyncClient) -> None:
    unknown = await client.post("/v1/jobs", json={"reward": "nope", "items": [{"response": "x"}]})
    assert unknown.status_code == 404
    missing = await client.get("/v1/jobs/job_doesnotexist")
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found"


async def test_a_lone_surrogate_in_a_job_is_refused_as_score_refuses_it(client: httpx.AsyncClient) -> None:
    """The job's body was parsed by the standard library, which reads "\\ud800" as a lone surrogate: the
    submission failed with a 500 (encoding its canonical form), or the job was accepted and then failed
    as an internal error when its stored text was parsed. It is read by /v1/score's parser now: the same
    422, invalid JSON."""
    body = b'{"reward": "exact_match", "items": [{"response": "a\\ud800", "reference": "a"}]}'
    r = await client.post("/v1/jobs", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["type"] == "invalid_request"
    score = await client.post("/v1/score", content=body, headers={"content-type": "application/json"})
    assert r.json() == score.json()


async def test_a_job_nested_deeper_than_score_reads_is_refused_at_submission(
    client: httpx.AsyncClient,
) -> None:
    """A job is scored from its canonical text by /v1/score's parser, which stops at 200 levels of
    nesting; the standard library's reads more: a job 300 deep was accepted and then failed as an
    internal error, one 600 deep failed the submission with a RecursionError (a 500)."""
    for depth in (300, 600):
        deep = b"[" * depth + b"]" * depth
        body = b'{"reward": "exact_match", "items": [{"response": "a", "metadata": {"x": ' + deep + b"}}]}"
        r = await client.post("/v1/jobs", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 422, (depth, r.text)
        assert r.json()["error"]["type"] == "invalid_request"


async def test_a_job_over_the_item_limit_is_limit_exceeded(make_app: Any) -> None:
    """A job over REWARDHUB_JOB_MAX_ITEMS is a size limit like /v1/score's REWARDHUB_MAX_ITEMS: 422
    ``limit_exceeded`` (the client's ``LimitExceeded``, which a caller catches to split the batch), not
    the ``invalid_request`` of a malformed field."""
    items = [{"response": "\\boxed{1}", "reference": "1"}] * 4
    async with make_app(job_max_items=3) as c:
        resp = await c.post("/v1/jobs", json={"reward": "math", "items": items})
    assert resp.status_code == 422, resp.text
    error = resp.json()["error"]
    assert error["type"] == "limit_exceeded" and error["param"] == "items"
    assert "REWARDHUB_JOB_MAX_ITEMS" in error["message"]


async def test_job_survives_a_restart(make_app: Any, redis_server: Any) -> None:
    async with make_app(redis_url=redis_server.url) as c:
        job_id = (await c.post("/v1/jobs", json=BODY)).json()["job_id"]
        await wait_done(c, job_id)
    async with make_app(redis_url=redis_server.url) as c:
        done = (await c.get(f"/v1/jobs/{job_id}")).json()
        assert done["status"] == "succeeded"
        assert [r["score"] for r in done["result"]["results"]] == [1.0, 0.0]


async def test_job_interrupted_by_shutdown_runs_after_restart(make_app: Any, redis_server: Any) -> None:
    slow = {
        "reward": "math",
        "items": [
            {"response": f"\\boxed{{{TOWER}}}", "reference": "4"},
            {"response": "\\boxed{4}", "reference": "4"},
        ],
        "options": {"timeout_s": 3, "use_cache": False},
    }
    async with make_app(redis_url=redis_server.url) as c:
        job_id = (await c.post("/v1/jobs", json=slow)).json()["job_id"]
        for _ in range(100):
            if (await c.get(f"/v1/jobs/{job_id}")).json()["status"] == "running":
                break
            await asyncio.sleep(0.02)
    # The service stopped mid-job; the next one picks it up and finishes it.
    async with make_app(redis_url=redis_server.url) as c:
        done = await wait_done(c, job_id, timeout_s=30)
        assert done["status"] == "succeeded"
        results = done["result"]["results"]
        assert results[0]["reason"] == "timeout" and results[1]["score"] == 1.0


class _CutOffStore(MemoryJobStore):
    """A store whose ``pending()`` turns a cancellation into "Redis is not answering", as a Redis call
    cut off mid-command can (redis-py reports the dropped connection; the store maps it to 503)."""

    entered = False  # the rescan loop is inside pending(), where a cancellation is swallowed

    async def pending(self) -> list[str]:
        self.entered = True
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            raise ServiceUnavailable("jobs need Redis, which is not answering (ConnectionError)") from None
        return []


async def test_close_stops_a_loop_whose_cancellation_was_swallowed(monkeypatch: pytest.MonkeyPatch) -> None:
    # The rescan sleep the loop would go back to is an hour, so a close that waits for it fails the 20 s
    # wait_for whatever the host's pace (with the real 15 s sleep, a 3 s bound on close() told them apart)
    monkeypatch.setattr(jobs_module, "_RESCAN_S", 3600.0)
    store = _CutOffStore(ttl_s=60)
    runner = JobRunner(store, cast(Any, None), cast(Any, None), concurrency=1, queue_max=8, max_items=8)
    await runner.start()
    await until(lambda: store.entered, "the rescan loop never called pending()")
    await asyncio.wait_for(runner.close(), 20)
    assert all(t.done() for t in runner._tasks)


async def test_a_job_scores_nan_as_nan_not_as_null(client: httpx.AsyncClient) -> None:
    """The job's body was stored with model_dump_json, which writes NaN as null, and the job is scored
    from the stored text: against a reference `{"const": NaN}` the response `null` scored 1.0 in a job
    and 0.0 in /v1/score. Found in review."""
    raw = (
        '{"reward": "json_schema", "items": [{"response": "null", "reference": {"const": NaN}}],'
        ' "options": {"use_cache": false}}'
    )
    direct = await client.post("/v1/score", content=raw, headers={"content-type": "application/json"})
    assert direct.status_code == 200, direct.text
    assert direct.json()["results"][0]["score"] == 0.0
    resp = await client.post("/v1/jobs", content=raw, headers={"content-type": "application/json"})
    assert resp.status_code == 202, resp.text
    job = await wait_done(client, resp.json()["job_id"])
    assert job["status"] == "succeeded" and job["result"]["results"][0]["score"] == 0.0, job


async def test_a_job_is_visible_only_to_the_key_that_submitted_it(make_app: Any) -> None:
    async with make_app(api_keys="key-a,key-b") as c:
        a, b = {"X-API-Key": "key-a"}, {"X-API-Key": "key-b"}
        resp = await c.post("/v1/jobs", json=BODY, headers=a)
        assert resp.status_code == 202, resp.text
        job_id = resp.json()["job_id"]
        for _ in range(600):
            done = (await c.get(f"/v1/jobs/{job_id}", headers=a)).json()
            if done["status"] == "succeeded":
                break
            await asyncio.sleep(0.05)
        assert [r["score"] for r in done["result"]["results"]] == [1.0, 0.0]
        # Another key gets the answer of an unknown id: neither the result nor that the job exists.
        other = await c.get(f"/v1/jobs/{job_id}", headers=b)
        assert other.status_code == 404 and other.json()["error"]["type"] == "not_found"
        assert "result" not in other.text


class _RedisProxy:
    """A TCP proxy in front of Redis (a fault at the transport boundary). Each chunk read on the way to
    Redis goes through ``to_redis`` and each on the way back through ``to_client``, with a dict that lives
    as long as the connection; a hook answering False drops the connection instead of passing the chunk."""

    def __init__(self, upstream_port: int):
        self.upstream_port = upstream_port
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return f"redis://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/0"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    async def to_redis(self, data: bytes, link: dict[str, Any]) -> bool:
        return True

    async def to_client(self, data: bytes, link: dict[str, Any]) -> bool:
        return True

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        link: dict[str, Any] = {}

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, hook: Any) -> None:
            try:
                while data := await src.read(65536):
                    if not await hook(data, link):
                        break
                    dst.write(data)
                    await dst.drain()
            except OSError:
                pass
            finally:
                writer.close()
                up_writer.close()

        await asyncio.gather(pump(reader, up_writer, self.to_redis), pump(up_reader, writer, self.to_client))


class _CuttingProxy(_RedisProxy):
    """Drops the connection of any command batch holding ``cut`` (the command never reaches Redis), or
    with ``deliver=True`` passes that batch on and drops the connection before Redis's reply comes back
    (the commands ran; the client cannot know)."""

    def __init__(self, upstream_port: int, cut: bytes, *, deliver: bool = False):
        super().__init__(upstream_port)
        self.cut, self.deliver = cut, deliver

    async def to_redis(self, data: bytes, link: dict[str, Any]) -> bool:
        if self.cut in data:
            link["sent_cut"] = True
            return self.deliver
        return True

    async def to_client(self, data: bytes, link: dict[str, Any]) -> bool:
        return not link.get("sent_cut")  # Redis's answer to the batch: lost on the way back


class _InterceptingProxy(_RedisProxy):
    """Awaits ``before(data)`` before passing each batch of commands on (something else happening in
    Redis between two commands of a client)."""

    def __init__(self, upstream_port: int, before: Any):
        super().__init__(upstream_port)
        self.before = before

    async def to_redis(self, data: bytes, link: dict[str, Any]) -> bool:
        await self.before(data)
        return True


class _SlowLinkProxy(_RedisProxy):
    """A slow link: every full 64 KiB read costs 50 ms more, in either direction (small commands, which
    never fill a read, pass at once)."""

    async def to_redis(self, data: bytes, link: dict[str, Any]) -> bool:
        if len(data) == 65536:
            await asyncio.sleep(0.05)
        return True

    to_client = to_redis


def queued_job(job_id: str, body: bytes) -> dict[str, Any]:
    """A job record as the service writes it when it queues ``body``."""
    from rewardhub.jobs import body_digest

    return {"job_id": job_id, "status": "queued", "created_at": time.time(), "body_sha256": body_digest(body)}


def bare_runner(store: RedisJobStore) -> JobRunner:
    """A job runner on ``store`` with no scoring service: a job it did run would fail (AttributeError)."""
    return JobRunner(store, cast(Any, None), cast(Any, None), concurrency=1, queue_max=8, max_items=8)


async def test_an_idempotency_key_whose_job_was_not_written_can_be_retried(redis_server: Any) -> None:
    """Redis failing between the Idempotency-Key's claim and the job's write left the key naming a job
    that never existed: every retry with that key waited for it and answered 503 until the key expired
    (REWARDHUB_JOB_TTL_S, a day by default), so the client's retries could not get past a blip."""
    from redis.asyncio import Redis

    from rewardhub.jobs import RedisJobStore

    idem = f"test:{time.time_ns()}"
    body = b'{"reward": "math"}'

    direct = Redis.from_url(redis_server.url)
    async with _CuttingProxy(redis_server.port, b"MULTI") as url:
        flaky = Redis.from_url(url)
        try:
            await RedisJobStore(flaky, ttl_s=3600).create(queued_job(f"job_a{idem}", body), body, idem)
        except ServiceUnavailable:
            pass
        else:
            raise AssertionError("the proxy should have cut the transaction")
        finally:
            await flaky.aclose()
    try:
        stored, created = await RedisJobStore(direct, ttl_s=3600).create(
            queued_job(f"job_b{idem}", body), body, idem
        )
        assert created and stored["job_id"] == f"job_b{idem}"
        # Once its job is written the key lasts as long as the job (no expiry while it waits).
        assert await direct.ttl(f"{RedisJobStore.P}:idem:{idem}") == -1
        again, created = await RedisJobStore(direct, ttl_s=3600).create(
            queued_job(f"job_c{idem}", body), body, idem
        )
        assert not created and again["job_id"] == f"job_b{idem}"
    finally:
        await direct.aclose()


async def test_an_idempotency_key_stays_with_a_job_written_whose_answer_was_lost(redis_server: Any) -> None:
    """Redis ran the job's write but the answer never came back (a timeout, a dropped connection, a client
    that hung up): the failure gave the Idempotency-Key's claim up though the job existed and was
    pending, so the client's retry with that key made a second job and the work ran twice."""
    from redis.asyncio import Redis

    from rewardhub.jobs import RedisJobStore

    idem = f"test:{time.time_ns()}"
    body = b'{"reward": "math"}'

    direct = Redis.from_url(redis_server.url)
    async with _CuttingProxy(redis_server.port, b"MULTI", deliver=True) as url:
        flaky = Redis.from_url(url)
        try:
            await RedisJobStore(flaky, ttl_s=3600).create(queued_job(f"job_a{idem}", body), body, idem)
        except ServiceUnavailable:
            pass
        finally:
            await flaky.aclose()
    try:
        store = RedisJobStore(direct, ttl_s=3600)
        assert await store.get(f"job_a{idem}") is not None  # the write happened
        again, created = await store.create(queued_job(f"job_b{idem}", body), body, idem)
        assert not created and again["job_id"] == f"job_a{idem}"
        assert f"job_b{idem}" not in await store.pending()
    finally:
        await direct.zrem(f"{RedisJobStore.P}:jobs:pending", f"job_a{idem}", f"job_b{idem}")
        await direct.aclose()


async def test_an_idempotency_key_whose_claim_vanishes_meanwhile_is_no_conflict(redis_server: Any) -> None:
    """A retry that found the key claimed by its first attempt, which then gave the claim up (its write
    failed) or let it expire before the retry read it, read no claim at all and compared the body's
    digest with nothing: 409 "already used with a different request body", for the same body, and a
    client does not retry a 409."""
    from redis.asyncio import Redis

    from rewardhub.jobs import RedisJobStore, body_digest

    idem = f"test:{time.time_ns()}"
    key = f"{RedisJobStore.P}:idem:{idem}".encode()
    body = b'{"reward": "math"}'
    direct = Redis.from_url(redis_server.url)
    await direct.set(key, f"job_first{idem}|{body_digest(body)}", ex=30)  # the first attempt's claim

    async def claim_goes_away(data: bytes) -> None:
        if b"GET" in data and key in data and b"SET" not in data:
            await direct.delete(key)

    job = {"job_id": f"job_retry{idem}", "status": "queued", "created_at": time.time()}
    try:
        async with _InterceptingProxy(redis_server.port, claim_goes_away) as url:
            flaky = Redis.from_url(url)
            try:
                stored, created = await RedisJobStore(flaky, ttl_s=3600).create(
                    {**job, "body_sha256": body_digest(body)}, body, idem
                )
            finally:
                await flaky.aclose()
        assert created and stored["job_id"] == f"job_retry{idem}"
    finally:
        await direct.zrem(f"{RedisJobStore.P}:jobs:pending", f"job_retry{idem}")
        await direct.aclose()


async def test_a_pending_job_whose_record_is_gone_leaves_the_pending_index(redis_server: Any) -> None:
    """A job whose record expired or was evicted (a Redis shared with the cache under maxmemory) before it
    ran stayed in the pending index for ever: every runner took it up again at every rescan (15 s),
    found nothing and left it there."""
    from redis.asyncio import Redis

    class Store(RedisJobStore):
        P = f"rh:test-gone-{time.time_ns()}"

    redis = Redis.from_url(redis_server.url)
    store = Store(redis, ttl_s=3600)
    body = b'{"reward": "math", "items": [{"response": "1"}]}'
    job_id = f"job_{time.time_ns()}"
    await store.create({**queued_job(job_id, body), "items": 1}, body, None)
    await redis.delete(f"{Store.P}:job:{job_id}", f"{Store.P}:job-body:{job_id}")  # expired / evicted
    runner = bare_runner(store)
    try:
        await runner.start()
        for _ in range(100):
            if not await store.pending():
                break
            await asyncio.sleep(0.05)
        assert await store.pending() == []
    finally:
        await runner.close()
        await redis.delete(f"{Store.P}:jobs:pending")
        await redis.aclose()


async def test_a_large_job_is_stored_and_answered_over_a_slow_link(make_app: Any, redis_server: Any) -> None:
    """Jobs used the cache's Redis client, whose per-operation timeout (REWARDHUB_REDIS_TIMEOUT_S, 0.25 s)
    is meant for small cache entries: a job's body and result are megabytes (the batches too large for
    /v1/score), so storing a large job answered 503, and a result that could not be written in time left
    the job running for ever (each retry of the write timed out again)."""
    items = [{"response": f"{i} " + "x" * 1000, "reference": f"{i}"} for i in range(2000)]
    body = {"reward": "exact_match", "items": items, "options": {"use_cache": False}}
    async with _SlowLinkProxy(redis_server.port) as url, make_app(redis_url=url) as c:
        resp = await c.post("/v1/jobs", json=body)
        assert resp.status_code == 202, resp.text
        done = await wait_done(c, resp.json()["job_id"], timeout_s=60)
        assert done["status"] == "succeeded" and len(done["result"]["results"]) == 2000


async def test_a_job_larger_than_the_cpu_queue_finishes(make_app: Any) -> None:
    """Items for the CPU pool beyond REWARDHUB_CPU_QUEUE_MAX_ITEMS were refused even by an idle pool:
    the job slept on the 429 and tried again, staying "running" for ever."""
    items = [
        {"response": f"\\boxed{{\\frac{{{i}}}{{3}} + \\sqrt{{2}}}}", "reference": f"\\sqrt{{2}}+{i}/3"}
        for i in range(1, 5)
    ]
    body = {"reward": "math", "items": items, "options": {"use_cache": False}}
    async with make_app(cpu_queue_max_items=2) as c:
        job_id = (await c.post("/v1/jobs", json=body)).json()["job_id"]
        done = await wait_done(c, job_id, timeout_s=20)
        assert done["status"] == "succeeded"
        assert [r["score"] for r in done["result"]["results"]] == [1.0] * 4


async def test_the_job_stores_own_redis_client_is_closed_with_the_app(
    make_app: Any, redis_server: Any
) -> None:
    """With the cache off, jobs still live in Redis, on a client of their own that the shutdown left
    open: a connection per start (a test suite's, a reloading server's) until garbage collection."""

    def clients() -> int:
        return len(redis_server.client().client_list())

    before = clients()
    async with make_app(redis_url=redis_server.url, cache_enabled=False) as c:
        job_id = (await c.post("/v1/jobs", json=BODY)).json()["job_id"]
        await wait_done(c, job_id)
        store = c.app.state.jobs.store  # type: ignore[attr-defined]
        assert clients() > before
    assert clients() == before, store


async def test_a_retried_job_is_answered_while_the_job_queue_is_full(
    make_app: Any, redis_server: Any
) -> None:
    """A client that lost the 202 and retried with its Idempotency-Key got 429 "jobs are waiting" when
    the queue was full, though the job it asked about was in that queue (here: the only one)."""
    slow = {
        "reward": "math",
        "items": [{"response": f"\\boxed{{{TOWER}}}", "reference": "4"}],
        "options": {"timeout_s": 3, "use_cache": False},
    }
    for redis_url in (None, redis_server.url):
        key = {"idempotency-key": f"retry-{time.time_ns()}"}
        async with make_app(job_queue_max=1, redis_url=redis_url) as c:
            first = await c.post("/v1/jobs", json=slow, headers=key)
            assert first.status_code == 202
            again = await c.post("/v1/jobs", json=slow, headers=key)
            assert again.status_code == 200, again.text
            assert again.json()["job_id"] == first.json()["job_id"]
            other = await c.post("/v1/jobs", json={**slow, "options": {"timeout_s": 2}}, headers=key)
            assert other.status_code == 409  # the same key with another body is still refused
            fresh = await c.post("/v1/jobs", json=slow)
            assert fresh.status_code == 429 and "retry-after" in fresh.headers


async def test_one_key_cannot_fill_the_job_queue(make_app: Any) -> None:
    """REWARDHUB_JOB_QUEUE_MAX_PER_KEY: a key with that many jobs waiting or running gets 429 (its own
    retry of one of them is still answered); another key's jobs are taken; finished jobs free the slot."""
    slow = {
        "reward": "math",
        "items": [{"response": f"\\boxed{{{TOWER}}}", "reference": "4"}],
        "options": {"timeout_s": 2, "use_cache": False},
    }
    async with make_app(api_keys="key-a,key-b", job_queue_max_per_key=1) as c:
        a = {"X-API-Key": "key-a", "idempotency-key": f"a-{time.time_ns()}"}
        b = {"X-API-Key": "key-b"}
        first = await c.post("/v1/jobs", json=slow, headers=a)
        assert first.status_code == 202
        second = await c.post("/v1/jobs", json=BODY, headers={"X-API-Key": "key-a"})
        assert second.status_code == 429 and "REWARDHUB_JOB_QUEUE_MAX_PER_KEY" in second.text
        again = await c.post("/v1/jobs", json=slow, headers=a)
        assert again.status_code == 200 and again.json()["job_id"] == first.json()["job_id"]
        assert (await c.post("/v1/jobs", json=BODY, headers=b)).status_code == 202
        for _ in range(600):  # the slot is free once the first job has finished
            later = await c.post("/v1/jobs", json=BODY, headers={"X-API-Key": "key-a"})
            if later.status_code != 429:
                break
            await asyncio.sleep(0.05)
        assert later.status_code == 202
        done = (await c.get(f"/v1/jobs/{first.json()['job_id']}", headers={"X-API-Key": "key-a"})).json()
        assert done["status"] == "succeeded"


class _StallingBodyStore(RedisJobStore):
    """Jobs in their own namespace of the real Redis, whose ``body()`` read answers only after a long
    while (a slow Redis): the runner holds the job's lease and has not started scoring it yet."""

    P = f"rh:test-stall-{time.time_ns()}"

    def __init__(self, redis: Any, ttl_s: int):
        super().__init__(redis, ttl_s)
        self.reading = asyncio.Event()

    async def body(self, job_id: str) -> bytes | None:
        raw = await super().body(job_id)
        self.reading.set()
        await asyncio.sleep(3600)
        return raw


async def test_a_job_claimed_but_not_started_is_handed_back_at_shutdown(redis_server: Any) -> None:
    """A shutdown that came between taking a job's lease and the start of its scoring (reading its body,
    writing "running") kept the lease: the next start, or another replica, left the job alone until the
    lease expired (30 s) and the rescan found it (15 s more), instead of running it at once."""
    from redis.asyncio import Redis

    from rewardhub.jobs import body_digest

    redis = Redis.from_url(redis_server.url)
    store = _StallingBodyStore(redis, ttl_s=3600)
    body = b'{"reward": "math", "items": [{"response": "1"}]}'
    job = {"job_id": f"job_{time.time_ns()}", "status": "queued", "created_at": time.time(), "items": 1}
    await store.create({**job, "body_sha256": body_digest(body)}, body, None)
    runner = bare_runner(store)
    try:
        await runner.start()
        await asyncio.wait_for(store.reading.wait(), 10)
        await runner.close()
        assert await store.claim(job["job_id"], "another-runner"), "the lease was kept"
        assert (await store.get(job["job_id"]) or {}).get("status") == "queued"
        assert job["job_id"] in await store.pending()
    finally:
        await runner.close()
        await redis.aclose()


async def test_jobs_with_several_workers_need_a_shared_store(make_app: Any, redis_server: Any) -> None:
    """With several workers and no Redis each worker kept its own jobs: a poll that reached another
    worker answered 404 for a job that existed, now and then. Jobs now say what they need (501, which a
    client does not retry), and with Redis they work."""
    body = {"reward": "exact_match", "items": [{"response": "a", "reference": "a"}]}
    async with make_app(workers=2) as c:
        resp = await c.post("/v1/jobs", json=body)
        assert resp.status_code == 501 and resp.json()["error"]["type"] == "not_configured"
        assert "REWARDHUB_REDIS_URL" in resp.json()["error"]["message"]
        assert (await c.post("/v1/score", json=body)).status_code == 200  # scoring itself is fine
    async with make_app(workers=2, redis_url=redis_server.url) as c:
        resp = await c.post("/v1/jobs", json=body)
        assert resp.status_code == 202, resp.text
        assert (await wait_done(c, resp.json()["job_id"]))["status"] == "succeeded"


class _FinishedMeanwhileStore(RedisJobStore):
    """Another runner (a second worker, a replica) finishes the job between this runner's read of the job
    and its claim of the lease: the other runner's last write drops the lease, so the claim succeeds."""

    async def claim(self, job_id: str, owner: str) -> bool:
        job = await self.get(job_id) or {}
        result = {"results": [{"id": "x", "score": 1.0}]}
        await self.save(
            {**job, "status": "succeeded", "finished_at": time.time(), "result": result}, done=True
        )
        return await super().claim(job_id, owner)


async def test_a_job_another_runner_finished_meanwhile_keeps_its_result(redis_server: Any) -> None:
    """A runner read a job as running (another worker had it), that worker finished it and dropped the
    lease, and then the runner's claim succeeded: it ran the job from the record it had read, found the
    body gone (deleted with the finish) and wrote the job over as failed, "the job's request body was
    lost". A client polling saw the job succeed and then fail, its result gone."""
    from redis.asyncio import Redis

    class Store(_FinishedMeanwhileStore):
        P = f"rh:test-finished-{time.time_ns()}"

    redis = Redis.from_url(redis_server.url)
    store = Store(redis, ttl_s=3600)
    body = b'{"reward": "math", "items": [{"id": "x", "response": "1", "reference": "1"}]}'
    job_id = f"job_{time.time_ns()}"
    await store.create({**queued_job(job_id, body), "status": "running", "items": 1}, body, None)
    runner = bare_runner(store)
    try:
        await runner._run(job_id)
        after = await store.get(job_id) or {}
        assert after.get("status") == "succeeded", after
        assert after["result"] == {"results": [{"id": "x", "score": 1.0}]}
        assert await redis.get(f"{Store.P}:job-lease:{job_id}") is None, "the lease was kept"
    finally:
        await redis.delete(f"{Store.P}:job:{job_id}", f"{Store.P}:jobs:pending")
        await redis.aclose()


async def test_the_embedded_job_store_keeps_finished_results_within_a_byte_budget(make_app: Any) -> None:
    """Without Redis every finished job's result stayed in process for REWARDHUB_JOB_TTL_S (a day) up to
    100,000 jobs, whatever their size: jobs of up to REWARDHUB_JOB_MAX_ITEMS (100,000) items each, one per
    training step, grew the service by gigabytes a day, where the embedded cache is held to
    REWARDHUB_CACHE_MAX_BYTES. The oldest finished jobs now go past REWARDHUB_JOB_MAX_BYTES (the newest
    is kept, whatever its size); a job waiting or running never does."""
    async with make_app(job_max_bytes=1) as c:
        first = (await c.post("/v1/jobs", json=BODY)).json()["job_id"]
        assert (await wait_done(c, first))["status"] == "succeeded"
        second = (await c.post("/v1/jobs", json=BODY)).json()["job_id"]
        assert (await wait_done(c, second))["status"] == "succeeded"
        gone = await c.get(f"/v1/jobs/{first}")
        assert gone.status_code == 404, gone.text
        assert "REWARDHUB_JOB_MAX_BYTES" in gone.json()["error"]["message"]
        kept = (await c.get(f"/v1/jobs/{second}")).json()
        assert [r["score"] for r in kept["result"]["results"]] == [1.0, 0.0]

    store = MemoryJobStore(ttl_s=3600, max_bytes=1)
    waiting = {**queued_job("job_waiting", b"{}"), "items": 1}
    await store.create(waiting, b"{}", None)
    for n in range(3):
        done = {**queued_job(f"job_done{n}", b"{}"), "status": "succeeded", "result": {"x": "y" * 100}}
        await store.create(done, b"{}", None)
        await store.save(done, done=True)
    assert await store.get("job_waiting") is not None and await store.body("job_waiting") == b"{}"
    assert [await store.get(f"job_done{n}") is not None for n in range(3)] == [False, False, True]


async def test_a_job_waiting_past_the_ttl_is_kept_until_it_finishes(redis_server: Any) -> None:
    """REWARDHUB_JOB_TTL_S counted from submission: the job's record, body and Idempotency-Key were written
    with that expiry, so a job still queued or running past it (a long queue, a small TTL) vanished (404),
    or failed "the job's request body was lost", and a retry with its key made a second job. An
    unfinished job is now kept until it finishes; its result is kept the TTL from then."""
    from redis.asyncio import Redis

    class Store(RedisJobStore):
        P = f"rh:test-ttl-{time.time_ns()}"

    redis = Redis.from_url(redis_server.url)
    store = Store(redis, ttl_s=60)
    body = b'{"reward": "math", "items": [{"response": "1"}]}'
    job_id = f"job_{time.time_ns()}"
    idem = f"test:{job_id}"
    keys = [f"{Store.P}:job:{job_id}", f"{Store.P}:job-body:{job_id}", f"{Store.P}:idem:{idem}"]
    try:
        job, created = await store.create({**queued_job(job_id, body), "items": 1}, body, idem)
        assert created
        assert [await redis.ttl(k) for k in keys] == [-1, -1, -1]  # kept while it waits
        await store.save({**job, "status": "running", "started_at": time.time()})
        assert [await redis.ttl(k) for k in keys] == [-1, -1, -1]  # and while it runs
        await store.save({**job, "status": "succeeded", "finished_at": time.time()}, done=True)
        record, _, key = [await redis.ttl(k) for k in keys]
        assert 0 < record <= 60 and 0 < key <= 60, (record, key)  # the TTL counts from the finish
        assert await redis.exists(keys[1]) == 0
    finally:
        await redis.delete(*keys, f"{Store.P}:jobs:pending")
        await redis.aclose()

    # The embedded store, on a clock the test moves: the same.
    now = [0.0]
    memory = MemoryJobStore(ttl_s=60, timer=lambda: now[0])
    job, _ = await memory.create({**queued_job("job_m", body), "items": 1}, body, "k:m")
    now[0] += 600
    assert await memory.get("job_m") is not None and await memory.body("job_m") == body
    again, created = await memory.create({**queued_job("job_m2", body), "items": 1}, body, "k:m")
    assert not created and again["job_id"] == "job_m"
    await memory.save({**job, "status": "succeeded"}, done=True)
    now[0] += 59
    assert (await memory.get("job_m") or {}).get("status") == "succeeded"
    assert await memory.find("k:m", job["body_sha256"]) is not None
    now[0] += 2
    assert await memory.get("job_m") is None and await memory.find("k:m", job["body_sha256"]) is None


async def test_a_result_redis_will_not_take_fails_the_job_instead_of_rerunning_it(
    make_app: Any, redis_server: Any
) -> None:
    """A job whose last write (its result) kept failing — a result larger than Redis takes, a Redis out of
    memory — stayed pending with its lease: every runner took it up again when the lease expired, scored
    it again and failed to store it again, for ever. The write is tried a few times, then the job is
    written as failed without its result, saying why. Here the connection carrying the succeeded job's
    write is dropped before it reaches Redis, every time."""
    from redis.asyncio import Redis

    body = {**BODY, "options": {"use_cache": False}}
    async with (
        _CuttingProxy(redis_server.port, b'"status":"succeeded"') as url,
        make_app(redis_url=url) as c,
    ):
        resp = await c.post("/v1/jobs", json=body)
        assert resp.status_code == 202, resp.text
        job_id = resp.json()["job_id"]
        done = await wait_done(c, job_id, timeout_s=60)
    assert done["status"] == "failed" and done["result"] is None, done
    assert "could not be stored" in done["error"]["message"], done
    direct = Redis.from_url(redis_server.url)
    try:
        assert job_id.encode() not in await direct.zrange(f"{RedisJobStore.P}:jobs:pending", 0, -1)
        assert 0 < await direct.ttl(f"{RedisJobStore.P}:job:{job_id}")
    finally:
        await direct.aclose()


async def test_a_job_started_too_often_without_finishing_is_failed(redis_server: Any) -> None:
    """A job whose runner died with it each time (a process killed for memory by this job), or whose
    result could never be stored, ran again at every start, for ever. Past a few starts it is failed."""
    from redis.asyncio import Redis

    class Store(RedisJobStore):
        P = f"rh:test-starts-{time.time_ns()}"

    redis = Redis.from_url(redis_server.url)
    store = Store(redis, ttl_s=3600)
    body = b'{"reward": "math", "items": [{"id": "x", "response": "1", "reference": "1"}]}'
    job_id = f"job_{time.time_ns()}"
    job = {**queued_job(job_id, body), "status": "running", "items": 1, "starts": 3}
    await store.create(job, body, None)
    runner = bare_runner(store)
    try:
        await runner._run(job_id)
        after = await store.get(job_id) or {}
        assert after.get("status") == "failed", after
        assert "started 3 times" in after["error"]["message"], after
        assert await store.pending() == []
    finally:
        await redis.delete(f"{Store.P}:job:{job_id}", f"{Store.P}:jobs:pending")
        await redis.aclose()


async def test_jobs_can_have_a_redis_of_their_own(make_app: Any, redis_server: Any) -> None:
    """Jobs lived in the cache's Redis, which the deploy docs ran with `allkeys-lru`: eviction there dropped
    a waiting job's request body and the job failed "the job's request body was lost", with no way to keep
    jobs elsewhere. REWARDHUB_JOB_REDIS_URL gives them a Redis (here a database) of their own, the cache
    staying where it was; alone, it is the job store several workers share."""
    import pytest
    from pydantic import ValidationError
    from redis.asyncio import Redis

    from conftest import make_settings

    cache_url = f"redis://127.0.0.1:{redis_server.port}/0"
    jobs_url = f"redis://127.0.0.1:{redis_server.port}/3"
    cache_db, jobs_db = Redis.from_url(cache_url), Redis.from_url(jobs_url)
    try:
        async with make_app(redis_url=cache_url, job_redis_url=jobs_url) as c:
            job_id = (await c.post("/v1/jobs", json=BODY)).json()["job_id"]
            assert (await wait_done(c, job_id))["status"] == "succeeded"
        assert await jobs_db.exists(f"{RedisJobStore.P}:job:{job_id}") == 1
        assert await cache_db.exists(f"{RedisJobStore.P}:job:{job_id}") == 0
        async with make_app(workers=2, job_redis_url=jobs_url) as c:
            resp = await c.post("/v1/jobs", json=BODY)
            assert resp.status_code == 202, resp.text
            assert (await wait_done(c, resp.json()["job_id"]))["status"] == "succeeded"
    finally:
        await cache_db.aclose()
        await jobs_db.aclose()
    with pytest.raises(ValidationError, match="REWARDHUB_JOB_REDIS_URL='host:6379'"):
        make_settings(job_redis_url="host:6379")


async def test_a_runner_releasing_a_lease_taken_over_meanwhile_leaves_it(redis_server: Any) -> None:
    """Releasing a lease read it, and deleted it if it named this runner: a lease that lapsed between
    the read and the delete, and that another runner took, was deleted under that runner, and a third
    could take the job up too. The delete is compared and set now (WATCH). Found in review."""
    from redis.asyncio import Redis

    class Store(RedisJobStore):
        P = f"rh:test-release-{time.time_ns()}"

    lease = f"{Store.P}:job-lease:job_r".encode()
    direct = Redis.from_url(redis_server.url)
    taken: list[bool] = []

    async def taken_meanwhile(data: bytes) -> None:
        if lease in data and b"DEL" in data and not taken:
            taken.append(True)
            await direct.set(lease, "runner-b", ex=30)  # runner-a's lapsed; runner-b took it

    try:
        async with _InterceptingProxy(redis_server.port, taken_meanwhile) as url:
            flaky = Redis.from_url(url)
            try:
                store = Store(flaky, ttl_s=3600)
                assert await store.claim("job_r", "runner-a")
                await store.release("job_r", "runner-a")
            finally:
                await flaky.aclose()
        assert taken, "the release never tried to delete the lease"
        assert await direct.get(lease) == b"runner-b"
    finally:
        await direct.delete(lease)
        await direct.aclose()


_OLD_KEY_BODY = b'{"reward": "math", "items": [{"response": "1"}]}'


def _old_key_job(job_id: str) -> dict[str, Any]:
    """A job record as the service writes it when it queues ``_OLD_KEY_BODY`` for ``key:a``."""
    return {
        "job_id": job_id,
        "status": "queued",
        "created_at": time.time(),
        "started_at": None,
        "finished_at": None,
        "items": 1,
        "result": None,
        "error": None,
        "body_sha256": body_digest(_OLD_KEY_BODY),
        "caller": "key:a",
    }


@pytest.mark.parametrize("finished", [False, True], ids=["waiting", "finished"])
async def test_an_older_versions_idempotency_key_whose_job_is_gone_makes_a_new_job(
    request: pytest.FixtureRequest, finished: bool
) -> None:
    """A key written before keys were marked "stored" holds ``job_id|digest`` like a claim, but lasts: its
    claim was made to last with the job's write (PERSIST, in the transaction that wrote the record) and
    given the job's TTL at its last write, while a claim lives ``_IDEM_CLAIM_S`` at most. Its job evicted
    (allkeys-lru, or volatile-lru for a finished one), every retry with the key waited for that job as for
    one being written and answered 503, until the key expired, up to REWARDHUB_JOB_TTL_S, or never for
    a job that was waiting. Such a key naming no job is taken by the new job now; a claim is still
    waited for."""
    from redis.asyncio import Redis

    class Store(RedisJobStore):
        P = f"rh:test-old-idem-{time.time_ns()}"

    redis = Redis.from_url(request.getfixturevalue("redis_server").url)
    store = Store(redis, ttl_s=3600)
    try:
        old = store._k("idem", "key:a:idem-old")
        await redis.set(
            old, f"job_o1|{body_digest(_OLD_KEY_BODY)}"
        )  # as an older version left it (no record)
        if finished:
            await redis.expire(old, 3600)
        job, created = await store.create(_old_key_job("job_o2"), _OLD_KEY_BODY, "key:a:idem-old")
        assert created and job["job_id"] == "job_o2" and "job_o2" in await store.pending()
        retried, created = await store.create(_old_key_job("job_o3"), _OLD_KEY_BODY, "key:a:idem-old")
        assert not created and retried["job_id"] == "job_o2"  # the key names the new job

        # a claim (this version's or an older one's) whose job is still being written is waited for
        claim = store._k("idem", "key:a:idem-claim")
        await redis.set(claim, f"job_c1|{body_digest(_OLD_KEY_BODY)}", ex=30)
        with pytest.raises(ServiceUnavailable):
            await store.create(_old_key_job("job_c2"), _OLD_KEY_BODY, "key:a:idem-claim")
        assert await redis.get(claim) == f"job_c1|{body_digest(_OLD_KEY_BODY)}".encode()
    finally:
        keys = [k async for k in redis.scan_iter(match=f"{Store.P}:*")]
        if keys:
            await redis.delete(*keys)
        await redis.aclose()


async def test_a_runners_write_does_not_bring_back_an_evicted_job(request: pytest.FixtureRequest) -> None:
    """Under maxmemory-policy allkeys-lru a waiting or running job's record can be evicted. The runner's
    later writes (``running``, its result, a shutdown's hand-back) wrote the record afresh: a job outside
    the pending index (its entry forgotten by a rescan, or evicted too), so a "running" one was never run
    again nor expired (no TTL), and a result came back for a job that GET had answered 404 for. A write
    now finds the record gone and makes none (as for a cancelled job: the runner drops what it has)."""
    from redis.asyncio import Redis

    class Store(RedisJobStore):
        P = f"rh:test-evicted-{time.time_ns()}"

    redis = Redis.from_url(request.getfixturevalue("redis_server").url)
    store = Store(redis, ttl_s=3600)
    try:
        job, created = await store.create(_old_key_job("job_ev"), _OLD_KEY_BODY, None)
        assert created
        await redis.delete(store._k("job", "job_ev"), store._k("job-sum", "job_ev"))  # evicted
        running = {**job, "status": "running", "started_at": time.time(), "starts": 1}
        assert not await store.save(running)
        done = {**running, "status": "succeeded", "finished_at": time.time(), "result": {"results": []}}
        assert not await store.save(done, done=True)
        assert await store.get("job_ev") is None
        assert not await redis.exists(store._k("job", "job_ev"), store._k("job-sum", "job_ev"))

        kept, _ = await store.create(_old_key_job("job_kept"), _OLD_KEY_BODY, None)  # one that is there
        assert await store.save({**kept, "status": "running"})
        assert (await store.get("job_kept") or {}).get("status") == "running"
    finally:
        keys = [k async for k in redis.scan_iter(match=f"{Store.P}:*")]
        if keys:
            await redis.delete(*keys)
        await redis.aclose()
