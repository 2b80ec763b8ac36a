"""API keys and admission control (per-key concurrency quotas, in-flight bounds)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from conftest import hold_the_service
from rewardhub.config import Settings
from rewardhub.security import Authenticator
from waiting import until

ITEM = {"reward": "exact_match", "items": [{"response": "a", "reference": "a"}]}


async def test_keys_required_when_configured(make_app: Any) -> None:
    async with make_app(api_keys="k-one, k-two") as c:
        missing = await c.post("/v1/score", json=ITEM)
        assert missing.status_code == 401 and missing.json()["error"]["type"] == "unauthorized"
        wrong = await c.post("/v1/score", json=ITEM, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 403 and wrong.json()["error"]["type"] == "forbidden"
        bearer = await c.post("/v1/score", json=ITEM, headers={"Authorization": "Bearer k-two"})
        assert bearer.status_code == 200
        x_key = await c.post("/v1/score", json=ITEM, headers={"X-API-Key": "k-one"})
        assert x_key.status_code == 200
        assert (await c.get("/v1/jobs/job_x")).status_code == 401
        # The catalog is an API route like the others (it was open to anyone).
        assert (await c.get("/v1/rewards")).status_code == 401
        assert (await c.get("/v1/rewards", headers={"X-API-Key": "nope"})).status_code == 403
        assert (await c.get("/v1/rewards", headers={"Authorization": "Bearer nope"})).status_code == 403
        assert (await c.get("/v1/rewards", headers={"X-API-Key": "k-one"})).status_code == 200
        # Probes stay open for load balancers and orchestrators.
        for path in ("/health", "/ready", "/metrics"):
            assert (await c.get(path)).status_code == 200


async def test_open_when_no_keys(client: httpx.AsyncClient) -> None:
    assert (await client.post("/v1/score", json=ITEM)).status_code == 200


async def test_per_key_concurrency_quota(make_app: Any) -> None:
    async with make_app(api_keys="a,b", per_key_max_concurrency=1) as c:
        first = await hold_the_service(c, 1, headers={"X-API-Key": "a"})
        second = await c.post("/v1/score", json=ITEM, headers={"X-API-Key": "a"})
        assert second.status_code == 429
        assert second.json()["error"]["type"] == "overloaded"
        assert "REWARDHUB_PER_KEY_MAX_CONCURRENCY" in second.json()["error"]["message"]
        assert int(second.headers["retry-after"]) >= 1
        other_key = await c.post("/v1/score", json=ITEM, headers={"X-API-Key": "b"})
        assert other_key.status_code == 200  # another experiment is not starved
        assert (await first).status_code == 200
        assert (await c.post("/v1/score", json=ITEM, headers={"X-API-Key": "a"})).status_code == 200


async def test_inflight_items_bound(make_app: Any) -> None:
    async with make_app(max_inflight_items=4) as c:
        first = await hold_the_service(c, 3)
        over = await c.post("/v1/score", json={"reward": "exact_match", "items": [{"response": "a"}] * 2})
        assert over.status_code == 429 and "REWARDHUB_MAX_INFLIGHT_ITEMS" in over.json()["error"]["message"]
        fits = await c.post("/v1/score", json=ITEM)
        assert fits.status_code == 200
        assert (await first).status_code == 200


async def test_per_key_rate_limit(make_app: Any) -> None:
    # One token per 50 s: the six requests below must all come before the first refill, a window no
    # loaded CI machine overruns (at one per 2 s, a host that stalled 2 s refilled a token mid-test and
    # the fourth request passed); the test then moves the bucket's clock by a refill period instead of
    # sleeping through it.
    async with make_app(api_keys="a,b", per_key_rate_limit=0.02, per_key_rate_burst=3) as c:
        codes = [
            (await c.post("/v1/score", json=ITEM, headers={"X-API-Key": "a"})).status_code for _ in range(5)
        ]
        assert codes[:3] == [200, 200, 200] and codes[3] == 429  # burst of 3, then the bucket is empty
        limited = await c.post("/v1/score", json=ITEM, headers={"X-API-Key": "a"})
        assert "REWARDHUB_PER_KEY_RATE_LIMIT" in limited.json()["error"]["message"]
        assert int(limited.headers["retry-after"]) >= 1
        assert (
            await c.post("/v1/score", json=ITEM, headers={"X-API-Key": "b"})
        ).status_code == 200  # per key
        # 50 s pass for key a's bucket: one token comes back (0.02 tokens/s), one, not the burst
        admission = c.app.state.admission
        key_id = Authenticator(("a",)).authenticate(None, "a").key_id
        admission._buckets[key_id].stamp -= 1 / admission.rate_per_s
        assert (await c.post("/v1/score", json=ITEM, headers={"X-API-Key": "a"})).status_code == 200
        assert (await c.post("/v1/score", json=ITEM, headers={"X-API-Key": "a"})).status_code == 429


async def test_secrets_never_reach_the_logs(make_app: Any, redis_server: Any, capsys: Any) -> None:
    key = "sk-very-secret-key-123"
    url = redis_server.url.replace("redis://", "redis://:hunter2-password@")
    async with make_app(api_keys=key, redis_url=url, log_level="debug", log_json=True) as c:
        await c.post("/v1/score", json=ITEM, headers={"Authorization": f"Bearer {key}"})
        await c.post("/v1/score", json=ITEM, headers={"Authorization": "Bearer wrong-key-456"})
        await c.get("/health")
    out = capsys.readouterr()
    logs = out.out + out.err
    assert logs  # something was logged
    for secret in (key, "hunter2-password", "wrong-key-456"):
        assert secret not in logs


async def test_a_waiting_job_is_not_starved_by_a_stream_of_small_requests() -> None:
    """A job larger than the in-flight limit fits only when nothing is in flight; with small requests
    always overlapping, it waited for ever. After waiting a while it goes first: new calls that would
    leave it no room get 429 until the work in flight drains."""
    from rewardhub.admission import Admission
    from rewardhub.errors import Overloaded
    from rewardhub.security import ANONYMOUS

    admission = Admission(max_items=10, per_key_concurrency=0)
    stop = asyncio.Event()
    refused = 0

    async def hand_over_hand() -> None:
        """Small calls, each admitted before the one before it ends: `items` never falls to 0 by itself."""
        nonlocal refused
        held: Any = None
        while not stop.is_set():
            nxt = admission.admit(ANONYMOUS, 2)
            try:
                await nxt.__aenter__()
            except Overloaded:
                refused += 1
                nxt = None
            if held is not None:
                await held.__aexit__(None, None, None)
            held = nxt
            await asyncio.sleep(0.02)
        if held is not None:
            await held.__aexit__(None, None, None)

    stream = asyncio.create_task(hand_over_hand())
    await until(lambda: admission.items > 0, "the stream of small calls never started")
    ran = asyncio.Event()

    async def job() -> None:
        async with admission.admit_when_room(ANONYMOUS, 25, priority_after_s=0.2):
            assert admission.items == 25  # it runs alone
            ran.set()

    try:
        await asyncio.wait_for(job(), timeout=30)  # (it starts within about a second)
    finally:
        stop.set()
        await stream
    assert ran.is_set() and refused > 0 and admission.items == 0
    # two waiting jobs do not hold each other up: the older goes first, then the younger
    order: list[str] = []

    async def named(name: str, delay: float) -> None:
        await asyncio.sleep(delay)
        async with admission.admit_when_room(ANONYMOUS, 25, priority_after_s=0.0):
            order.append(name)
            await asyncio.sleep(0.05)

    async with admission.admit(ANONYMOUS, 5):
        tasks = [asyncio.create_task(named("old", 0)), asyncio.create_task(named("young", 0.05))]
        # both wait before the room is made (a fixed 0.2 s, which a stalled loop could outlast)
        await until(lambda: len(admission._waiters) == 2, "the two jobs never both waited")
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=20)
    assert order == ["old", "young"]


async def test_a_job_that_comes_back_keeps_its_place_in_line() -> None:
    """A job that left the line (the CPU queue was full) and came back was a new waiter, behind every
    job that arrived meanwhile; with ``since`` it keeps the time it first began to wait."""
    import time

    from rewardhub.admission import Admission
    from rewardhub.security import ANONYMOUS

    admission = Admission(max_items=10, per_key_concurrency=0)
    order: list[str] = []

    async def job(name: str, since: float | None) -> None:
        async with admission.admit_when_room(ANONYMOUS, 25, priority_after_s=0.0, since=since):
            order.append(name)
            await asyncio.sleep(0.05)

    async with admission.admit(ANONYMOUS, 5):
        newcomer = asyncio.create_task(job("newcomer", None))
        await until(lambda: len(admission._waiters) == 1, "the newcomer never waited")
        returning = asyncio.create_task(job("returning", time.monotonic() - 100))
        # both wait before the room is made (fixed sleeps, which a stalled loop could outlast)
        await until(lambda: len(admission._waiters) == 2, "the returning job never waited")
    await asyncio.wait_for(asyncio.gather(newcomer, returning), timeout=20)
    assert order == ["returning", "newcomer"]


def test_retry_after_is_never_shorter_than_the_wait() -> None:
    """Retry-After (whole seconds) was the wait rounded to nearest, half to even: a full CPU queue's 1.4 s
    or a sandbox's 2.5 s sent clients back after 1 s or 2 s, before the room they were told to wait for."""
    from rewardhub.errors import Overloaded

    for wait, header in ((0.2, "1"), (1.0, "1"), (1.4, "2"), (2.5, "3"), (3.0, "3")):
        assert Overloaded("full", retry_after_s=wait).headers["Retry-After"] == header, wait


async def test_a_job_held_back_by_its_own_keys_quota_does_not_hold_back_other_keys() -> None:
    """A job waiting for its own key's turn (REWARDHUB_PER_KEY_MAX_CONCURRENCY: the key's other job or
    request is running) took priority over everyone's new work as if it were waiting for room: another
    key's request that fitted was refused 429 until the key's running work ended, though the waiting job
    could not start before then anyway (one key's second job shut the others out)."""
    from rewardhub.admission import Admission
    from rewardhub.security import Caller

    admission = Admission(max_items=10, per_key_concurrency=1)
    a, b = Caller("key:a"), Caller("key:b")
    started = asyncio.Event()

    async def job() -> None:
        async with admission.admit_when_room(a, 5, priority_after_s=0.0):
            started.set()

    async with admission.admit(a, 3):  # key a's running work
        waiting = asyncio.create_task(job())
        for _ in range(3):
            await asyncio.sleep(0)  # the job has asked and waits for key a's turn
        assert not started.is_set()
        async with admission.admit(b, 4):  # fits beside key a's 3 items: not refused for the waiting job
            assert admission.items == 7
    await asyncio.wait_for(waiting, timeout=10)
    assert started.is_set() and admission.items == 0


def test_keys_set_to_no_key_stop_the_start() -> None:
    """REWARDHUB_API_KEYS set but holding no key (",", " ": a template whose variables were empty) left the
    API open to anyone, with only the warning an unset variable gets; it is a setting error now. Unset
    (or empty, as compose's ${REWARDHUB_API_KEYS:-} gives) is still an open API."""
    for raw in (",", " , ,", " "):
        with pytest.raises(ValidationError, match="REWARDHUB_API_KEYS is set but holds no key"):
            Settings(_env_file=None, api_keys=raw)  # type: ignore[call-arg]
    assert Settings(_env_file=None, api_keys="").api_keys is None  # type: ignore[call-arg]
    assert Settings(_env_file=None, api_keys=" k1 ,").api_keys == " k1 ,"  # type: ignore[call-arg]
