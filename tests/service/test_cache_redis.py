"""The Redis cache: keys land in Redis, and a dead Redis costs the cache, never a request."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

import httpx

from rewardhub.cache import MemoryCache, RedisCache, item_key
from waiting import until


def items(tag: str, n: int = 3) -> list[dict[str, Any]]:
    return [{"id": f"{tag}{i}", "response": f"x{i}", "reference": f"X{i}"} for i in range(n)]


async def score(c: httpx.AsyncClient, its: list[dict[str, Any]]) -> list[dict[str, Any]]:
    resp = await c.post("/v1/score", json={"reward": "exact_match", "items": its})
    assert resp.status_code == 200, resp.text
    results: list[dict[str, Any]] = resp.json()["results"]
    return results


async def test_key_is_in_redis_with_ttl(make_app: Any, redis_server: Any) -> None:
    r = redis_server.client()
    before = set(r.keys("rh:v1:exact_match:*"))  # the Redis is the session's: other tests' keys, other TTLs
    async with make_app(redis_url=redis_server.url, cache_ttl_s=600) as c:
        assert (await c.get("/health")).json()["cache"] == "redis"
        # Its own content: "x0" is scored by other tests too (a key is the content's, not the id's), so
        # that "first" was uncached depended on which ran before.
        token = uuid.uuid4().hex
        mine = [{"id": "ttl-0", "response": f"x0 {token}", "reference": f"X0 {token}"}]
        first = await score(c, mine)
        second = await score(c, mine)
    assert first[0]["cached"] is False and second[0]["cached"] is True
    assert first[0]["score"] == second[0]["score"] == 1.0
    keys = [k.decode() for k in r.keys("rh:v1:exact_match:*") if k not in before]
    assert keys, "no exact_match key in redis"
    assert all(k.startswith(f"rh:v1:exact_match:{first[0]['reward_version']}:") for k in keys)
    assert all(0 < r.ttl(k) <= 600 for k in keys)


async def test_cached_result_survives_a_service_restart(make_app: Any, redis_server: Any) -> None:
    async with make_app(redis_url=redis_server.url) as c:
        await score(c, items("restart-"))
    async with make_app(redis_url=redis_server.url) as c:
        assert [r["cached"] for r in await score(c, items("restart-"))] == [True, True, True]


async def test_a_code_result_is_not_served_under_other_sandbox_limits(
    make_app: Any, redis_server: Any
) -> None:
    """A program's verdict depends on the server's sandbox limits (REWARDHUB_SANDBOX_OUTPUT_LIMIT_BYTES,
    _MEMORY_MB, _MAX_TIMEOUT_S...), which were in neither the config nor the version: a replica (or a
    restart) with other limits sharing the Redis served the other limits' verdict. Found in review."""
    out = "a" * 100_000
    item = {"response": f"```python\nprint({out!r})\n```", "reference": {"cases": [{"stdout": out}]}}
    body = {"reward": "code", "items": [item]}
    async with make_app(redis_url=redis_server.url, sandbox_output_limit_bytes=16 << 10) as c:
        (small,) = (await c.post("/v1/score", json=body)).json()["results"]
    assert (small["score"], small["cached"]) == (0.0, False), small
    assert small["details"]["tests"][0]["message"] == "output limit exceeded"
    async with make_app(redis_url=redis_server.url) as c:
        (default,) = (await c.post("/v1/score", json=body)).json()["results"]
        (again,) = (await c.post("/v1/score", json=body)).json()["results"]
    assert (default["score"], default["cached"]) == (1.0, False), default
    assert (again["score"], again["cached"]) == (1.0, True)


async def test_redis_stopped_mid_run_then_back(make_app: Any, redis_server: Any) -> None:
    async with make_app(redis_url=redis_server.url, redis_retry_interval_s=0.2) as c:
        await score(c, items("down-"))
        redis_server.stop()
        try:
            # Every request still succeeds, scored without the cache.
            for round_ in range(3):
                results = await score(c, items(f"down-{round_}-"))
                assert [r["score"] for r in results] == [1.0, 1.0, 1.0]
                assert not any(r["cached"] for r in results)
            health = (await c.get("/health")).json()
            assert health["cache_up"] is False
            metrics = (await c.get("/metrics")).text
            assert "rewardhub_cache_errors_total" in metrics
            assert "rewardhub_cache_up 0.0" in metrics
        finally:
            redis_server.start()
        # The service reconnects by itself and caching resumes.
        for _ in range(50):
            if (await c.get("/health")).json()["cache_up"]:
                break
            await asyncio.sleep(0.1)
        assert (await c.get("/health")).json()["cache_up"] is True
        await score(c, items("back-"))
        assert [r["cached"] for r in await score(c, items("back-"))] == [True, True, True]


async def test_ready_sees_a_redis_gone_while_the_service_was_idle(make_app: Any, redis_server: Any) -> None:
    """/ready reported the cache's state from its last operation: an idle service said "up" long after
    Redis had gone (and its metric too). /ready now asks Redis when it thinks it up."""
    async with make_app(redis_url=redis_server.url, redis_retry_interval_s=60) as c:
        assert (await c.get("/ready")).json()["checks"]["cache"]["up"] is True
        redis_server.stop()
        try:
            ready = await c.get("/ready")
            assert ready.status_code == 200  # a down cache degrades caching, not readiness
            assert ready.json()["checks"]["cache"]["up"] is False, ready.text
            assert (await c.get("/health")).json()["cache_up"] is False
        finally:
            redis_server.start()


async def test_redis_down_at_start_is_not_fatal(make_app: Any) -> None:
    async with make_app(redis_url="redis://127.0.0.1:1/0", redis_retry_interval_s=5) as c:
        results = await score(c, items("never-"))
        assert [r["score"] for r in results] == [1.0, 1.0, 1.0]
        assert (await c.get("/ready")).status_code == 200


async def test_a_full_redis_still_serves_its_reads(redis_server: Any) -> None:
    # A write Redis refuses (over maxmemory with noeviction, or to a read-only replica) marked the whole
    # cache down, so the entries it still held were served as misses until the reconnect loop's ping.
    r = redis_server.client()
    errors: list[str] = []
    cache = RedisCache(redis_server.url, ttl_s=60, retry_interval_s=60, on_error=errors.append)
    await cache.start()
    before = r.config_get("maxmemory*")
    try:
        await cache.set_many([("rh:test:full-kept", b"kept")])
        r.config_set("maxmemory-policy", "noeviction")
        r.config_set("maxmemory", "1")  # every write is over the limit
        await cache.set_many([("rh:test:full-new", b"new")])
        assert errors == ["set"]
        assert cache.up is True
        assert await cache.get_many(["rh:test:full-kept", "rh:test:full-new"]) == [b"kept", None]
    finally:
        r.config_set("maxmemory", before["maxmemory"])
        r.config_set("maxmemory-policy", before["maxmemory-policy"])
        r.delete("rh:test:full-kept")
        await cache.close()


async def test_claims_are_per_process_and_released_only_by_their_holder(redis_server: Any) -> None:
    """Single flight across processes (cache.py, Claims): two caches are two processes. A claim is
    refused to the other process (False) until its holder releases it; a result written meanwhile is
    answered instead of a claim; another request of the holder's own process takes the claim over, and
    the first request's release then leaves that request's claim in place. A full Redis (noeviction)
    refuses claims: None (score here, as without Redis), counted, and the cache still up."""
    errors: list[str] = []
    one = RedisCache(redis_server.url, ttl_s=60, retry_interval_s=60, on_error=errors.append)
    two = RedisCache(redis_server.url, ttl_s=60, retry_interval_s=60)
    await one.start()
    await two.start()
    r = redis_server.client()
    try:
        a, b, theirs = one.new_claims(), one.new_claims(), two.new_claims()
        assert a is not None and b is not None and theirs is not None
        assert await one.claim(["k1", "k2"], a) == [True, True]
        assert await two.claim(["k1", "k2"], theirs) == [False, False]
        assert await one.claim(["k2"], b) == [True]  # (this process's: its requests decide among them)
        await one.set_many([("k1", b"result")], a)  # the result, then a's claims released
        assert await two.claim(["k1", "k2"], theirs) == [b"result", False]  # k2 is b's now
        await one.release(b)
        assert await two.claim(["k2"], theirs) == [True]
        await two.release(theirs)
        assert r.keys("rh:claim:*") == []
        before = r.config_get("maxmemory*")
        try:
            r.config_set("maxmemory-policy", "noeviction")
            r.config_set("maxmemory", "1")
            c = one.new_claims()
            assert c is not None
            assert await one.claim(["k3"], c) is None
            assert "claim" in errors and one.up is True
        finally:
            r.config_set("maxmemory", before["maxmemory"])
            r.config_set("maxmemory-policy", before["maxmemory-policy"])
        assert r.keys("rh:claim:*") == []
    finally:
        r.close()
        await one.close()
        await two.close()


async def test_a_release_or_a_renewal_on_a_redis_gone_marks_it_down(redis_server: Any) -> None:
    """The claims' other round trips read a Redis gone as the lookups and writes do: counted under their
    own op and the cache marked down (it then serves misses, takes no claims). A renewal that failed keeps
    the claims its process holds, to renew once Redis is back. (Neither failure was exercised before.)
    Two caches, two processes: one releases its claim, the other's renewal finds Redis gone."""
    errors: dict[str, list[str]] = {"one": [], "two": []}
    one = RedisCache(redis_server.url, ttl_s=60, retry_interval_s=60, on_error=errors["one"].append)
    two = RedisCache(redis_server.url, ttl_s=60, retry_interval_s=60, on_error=errors["two"].append)
    await one.start()
    await two.start()
    try:
        mine, theirs = one.new_claims(), two.new_claims()
        assert mine is not None and theirs is not None
        assert await one.claim(["rh:test:one"], mine) == [True]
        assert await two.claim(["rh:test:two"], theirs) == [True]
        redis_server.stop()
        try:
            await one.release(mine)  # (well before the first renewal, a third of CLAIM_TTL_S after start)
            assert (errors["one"], one.up) == (["release"], False)
            await until(lambda: errors["two"] == ["renew"], "no renewal failed")
            assert two.up is False
            assert list(two._held) == ["rh:claim:rh:test:two"]  # (kept, to renew once Redis is back)
        finally:
            redis_server.start()
    finally:
        await one.close()
        await two.close()


async def test_memory_cache_evicts_least_recently_used() -> None:
    cache = MemoryCache(max_entries=2, ttl_s=60)
    await cache.set_many([("a", b"1"), ("b", b"2")])
    assert await cache.get_many(["a"]) == [b"1"]  # touch a
    await cache.set_many([("c", b"3")])
    assert await cache.get_many(["a", "b", "c"]) == [b"1", None, b"3"]


def test_key_depends_on_every_input() -> None:
    base = item_key("math", "1.0.0", b"{}", ["r", "g"])
    assert base.startswith("rh:v1:math:1.0.0:")
    assert item_key("math", "1.0.0", b"{}", ["r", "g"]) == base
    assert item_key("math", "1.0.1", b"{}", ["r", "g"]) != base
    assert item_key("math", "1.0.0", b'{"a":1}', ["r", "g"]) != base
    assert item_key("math", "1.0.0", b"{}", ["r", "h"]) != base
    assert item_key("math", "1.0.0", b"{}", [{"b": 1, "a": 2}]) == item_key(
        "math", "1.0.0", b"{}", [{"a": 2, "b": 1}]
    )


def test_key_tells_non_finite_floats_from_null() -> None:
    # orjson writes NaN and ±Infinity as null: hashed that way, they shared a key with null.
    keys = {
        item_key("json_schema", "1", b"{}", ["r", {"const": v}])
        for v in (None, float("nan"), float("inf"), float("-inf"))
    }
    assert len(keys) == 4
    assert item_key("json_schema", "1", b"{}", ["r", {"const": float("nan")}]) == item_key(
        "json_schema", "1", b"{}", ["r", {"const": float("nan")}]
    )


async def test_memory_cache_is_bounded_in_bytes() -> None:
    # Bounded by its entry count alone, the embedded cache kept 200,000 results whatever their size; a code
    # result lists up to 100 tests (tens of KB each), so a code run's cache grew to gigabytes.
    cache = MemoryCache(max_entries=1000, ttl_s=60, max_bytes=20_000)
    keys = [f"k{i}" for i in range(100)]
    await cache.set_many([(k, bytes(1000)) for k in keys])
    held = [v for v in await cache.get_many(keys) if v is not None]
    assert held and sum(len(v) for v in held) <= 20_000
    assert await cache.get_many(["k99"]) == [bytes(1000)]  # the least recently used went first
    await cache.set_many([("huge", bytes(50_000))])  # more than the whole budget: not cached, no error
    assert await cache.get_many(["huge", "k99"]) == [None, bytes(1000)]


async def test_the_embedded_cache_takes_its_byte_budget_from_the_settings(make_app: Any) -> None:
    async with make_app(cache_max_bytes=1) as c:  # no result fits
        await score(c, items("budget-", 1))
        assert [r["cached"] for r in await score(c, items("budget-", 1))] == [False]
    async with make_app() as c:
        await score(c, items("budget-", 1))
        assert [r["cached"] for r in await score(c, items("budget-", 1))] == [True]


async def test_a_large_lookup_asks_for_one_part_after_the_other(redis_server: Any) -> None:
    """Redis answers a pipeline only once it has run all of it: a lookup of 4,096 results sent as 16 MGETs
    in one pipeline got its first byte back after all of them were gathered (160 MB in the test below:
    0.35-0.5 s on a loaded 2-core host, against 0.06 s for one MGET), past REWARDHUB_REDIS_TIMEOUT_S,
    and a healthy Redis was marked down. Each MGET now goes out once the one before it was answered:
    here a proxy on the connection records how much Redis had answered when each MGET went out."""
    answered = 0
    sent_at: list[int] = []  # bytes Redis had answered when each MGET went to it

    async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, to_redis: bool) -> None:
        nonlocal answered
        tail = b""
        try:
            while data := await reader.read(1 << 16):
                if to_redis:
                    seen = tail + data  # (a command name cut between two reads is counted once)
                    sent_at.extend([answered] * seen.count(b"MGET"))
                    tail = seen[-3:]
                else:
                    answered += len(data)
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def relay(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        redis_r, redis_w = await asyncio.open_connection("127.0.0.1", redis_server.port)
        await asyncio.gather(forward(client_r, redis_w, True), forward(redis_r, client_w, False))

    keys = [f"rh:test:parts:{i}" for i in range(4096)]
    r = redis_server.client()
    r.mset({k: f"value {k}" for k in keys})
    proxy = await asyncio.start_server(relay, "127.0.0.1", 0)
    port = proxy.sockets[0].getsockname()[1]
    errors: list[str] = []
    cache = RedisCache(f"redis://127.0.0.1:{port}/0", ttl_s=60, retry_interval_s=60, on_error=errors.append)
    await cache.start()
    try:
        got = await cache.get_many(keys)
        assert (errors, cache.up) == ([], True)
        assert got == [f"value {k}".encode() for k in keys]
        assert len(sent_at) == 16 and sent_at == sorted(set(sent_at)), sent_at  # one answered before the next
    finally:
        await cache.close()
        proxy.close()
        r.delete(*keys)


async def test_a_large_batch_does_not_take_a_healthy_redis_down(redis_server: Any) -> None:
    # REWARDHUB_REDIS_TIMEOUT_S bounds the send of a whole pipeline and the read of each reply: the write
    # and the MGET of one large batch (4,096 results with their test logs, 160 MB here) took longer than
    # that on a healthy Redis, which was marked down, the batch's results left uncached and every request
    # after it served without the cache until the reconnect.
    errors: list[str] = []
    cache = RedisCache(redis_server.url, ttl_s=60, retry_interval_s=60, on_error=errors.append)
    await cache.start()
    keys = [f"rh:test:large:{i}" for i in range(4096)]
    value = b"x" * 40_000
    try:
        await cache.set_many([(k, value) for k in keys])
        assert (errors, cache.up) == ([], True)
        got = await cache.get_many(keys)
        assert (errors, cache.up) == ([], True)
        assert got == [value] * len(keys)
    finally:
        redis_server.client().flushdb()
        await cache.close()


async def test_an_unreadable_entry_is_a_miss_not_a_failed_request(make_app: Any, redis_server: Any) -> None:
    """A cache entry that is not a result (cut short, or written over by another program sharing the
    Redis) raised out of the request: every request holding that item answered 500 for the entry's whole
    TTL. Found in review. It is now a miss: the item is scored again and its entry written over."""
    token = uuid.uuid4().hex
    mine = [{"id": "bad-0", "response": f"x {token}", "reference": f"x {token}"}]
    r = redis_server.client()
    async with make_app(redis_url=redis_server.url) as c:
        (first,) = await score(c, mine)
        (key,) = [
            k for k in r.keys(f"rh:v1:exact_match:{first['reward_version']}:*") if token.encode() in r.get(k)
        ]
        for junk in (b"garbage{", b"[1, 2]", b'{"score": 1.0}'):
            r.set(key, junk)
            (again,) = await score(c, mine)
            assert (again["score"], again["valid"], again["cached"]) == (1.0, True, False), junk
            assert token.encode() in r.get(key)  # written over with the result
        (last,) = await score(c, mine)
    assert last["cached"] is True and last["score"] == 1.0


async def test_concurrent_identical_requests_score_an_item_once(make_app: Any, redis_server: Any) -> None:
    """Two requests holding the same item at the same time (a client's retry after its timeout of a batch
    still being scored, as OpenRLHF sends) both missed the cache and scored it: twice the work, on a
    service slow already. Found in review. The second now waits for the first's result (single flight,
    per process), served as a cache hit. The program sleeps a second, so the first is still running when
    the second looks the item up."""
    token = uuid.uuid4().hex
    program = f"import time\ntime.sleep(1)\nprint({token!r})"
    item = {"response": f"```python\n{program}\n```", "reference": {"cases": [{"stdout": token}]}}
    body = {"reward": "code", "items": [item]}
    async with make_app(redis_url=redis_server.url) as c:
        first, second = await asyncio.gather(c.post("/v1/score", json=body), c.post("/v1/score", json=body))
        metrics = (await c.get("/metrics")).text
    (a,), (b,) = first.json()["results"], second.json()["results"]
    assert (a["score"], b["score"]) == (1.0, 1.0), (a, b)
    assert sorted([a["cached"], b["cached"]]) == [False, True]
    assert 'rewardhub_reward_batch_latency_seconds_count{reward="code"} 1.0' in metrics  # one batch run
    # one miss (the item scored) and one hit (the item waited for): neither lost nor counted twice
    assert 'rewardhub_cache_misses_total{reward="code"} 1.0' in metrics
    assert 'rewardhub_cache_hits_total{reward="code"} 1.0' in metrics


async def test_a_request_waiting_for_a_cancelled_one_scores_the_item_itself(make_app: Any) -> None:
    """Single flight: the request scoring an item goes away (its client disconnected) while another waits
    for its result; the waiting one is neither cancelled with it nor left waiting, and scores the item."""
    token = uuid.uuid4().hex
    # (fixed 0.2 s sleeps left it to chance whether the first was scoring and the second waiting for it
    # when the first went away: on a loaded host the test passed without the case it is about)
    program = f"import time\ntime.sleep(3)\nprint({token!r})"
    item = {"response": f"```python\n{program}\n```", "reference": {"cases": [{"stdout": token}]}}
    body = {"reward": "code", "items": [item]}
    async with make_app() as c:
        scoring = c.app.state.scoring
        first = asyncio.create_task(c.post("/v1/score", json=body))
        await until(lambda: len(scoring._inflight) == 1, "the first request never began scoring the item")
        second = asyncio.create_task(c.post("/v1/score", json=body))
        await until(lambda: scoring.waiting == 1, "the second request never waited for the first")
        first.cancel()
        resp = await asyncio.wait_for(second, timeout=60)
    assert resp.status_code == 200, resp.text
    (r,) = resp.json()["results"]
    assert (r["score"], r["valid"], r["cached"]) == (1.0, True, False), r


async def test_concurrent_identical_requests_share_a_result_not_for_the_cache(make_app: Any) -> None:
    """Single flight, for a result the cache may not hold (this moment's: here the item's wall-clock limit
    cut a sleeping program off, a transient 0): the waiting request takes it, as an identical item of
    the same request would, instead of waiting and then scoring the item again (twice the deadline)."""
    token = uuid.uuid4().hex
    program = f"import time\ntime.sleep(2)\nprint({token!r})"
    item = {"response": f"```python\n{program}\n```", "reference": {"cases": [{"stdout": token}]}}
    body = {"reward": {"name": "code", "config": {"total_timeout_s": 0.5}}, "items": [item]}
    async with make_app() as c:
        first, second = await asyncio.gather(c.post("/v1/score", json=body), c.post("/v1/score", json=body))
        again = (await c.post("/v1/score", json=body)).json()["results"][0]
        metrics = (await c.get("/metrics")).text
    (a,), (b,) = first.json()["results"], second.json()["results"]
    assert (a["score"], b["score"], a["cached"], b["cached"]) == (0.0, 0.0, False, False), (a, b)
    assert again["cached"] is False  # (not for the cache: the third request scored it again)
    assert 'rewardhub_reward_batch_latency_seconds_count{reward="code"} 2.0' in metrics  # not 3


async def test_equivalent_composites_share_cache_entries(make_app: Any, redis_server: Any) -> None:
    """A composite's cache key hashed its parts' specs as written, so a part given as "exact_match",
    {"name": "exact_match", "config": {}} or with its defaults spelled out made different keys for one
    scoring (misses only). Each part's spec is keyed as a top-level one is: its name, version and
    validated config, at any depth; a config that changes a score still changes the key."""
    from rewardhub.rewards.exact_match import ExactMatchConfig

    token = uuid.uuid4().hex
    mine = [{"id": "eq-0", "response": f"x {token}", "reference": f"X {token}"}]
    defaults = ExactMatchConfig().model_dump(mode="json")
    strict = {"name": "exact_match", "config": {"normalize": "none", "case_sensitive": True}}

    def top(part: Any) -> dict[str, Any]:  # the part at the first level
        return {"name": "composite", "config": {"components": [{"reward": part}]}}

    def nested(part: Any) -> dict[str, Any]:  # the part one level down only
        return {
            "name": "composite",
            "config": {"components": [{"reward": "exact_match"}, {"reward": top(part)}]},
        }

    async def scored(c: httpx.AsyncClient, spec: dict[str, Any]) -> tuple[float, bool]:
        resp = await c.post("/v1/score", json={"reward": spec, "items": mine})
        assert resp.status_code == 200, resp.text
        (result,) = resp.json()["results"]
        return result["score"], result["cached"]

    async with make_app(redis_url=redis_server.url) as c:
        for shape, full in ((top, 1.0), (nested, 2.0)):
            seen = [
                await scored(c, shape(part))
                for part in (
                    "exact_match",
                    {"name": "exact_match", "config": {}},
                    {"name": "exact_match", "config": defaults},
                    {"name": "exact_match"},
                )
            ]
            assert seen == [(full, False), (full, True), (full, True), (full, True)], (shape, seen)
            assert await scored(c, shape(strict)) == (full - 1.0, False)
            assert await scored(c, shape(strict)) == (full - 1.0, True)


async def test_a_request_waiting_past_its_deadline_for_an_item_scores_it_itself(make_app: Any) -> None:
    """Single flight: a request waiting for an item another request is scoring gave up at its per-item
    deadline, counted in wall-clock time from its start, and answered the item ``timeout`` (invalid).
    But that deadline is a bound on the item's own scoring, not on a wait: a CPU batch gives each item
    its deadline of compute (a retried batch of thousands outlasts it in wall time), and the code reward
    bounds a program by its ``total_timeout_s`` alone. Here the program sleeps 2 s under a request
    deadline of 1 s: scored, it passes; the waiting request gave it up as a timeout. Found in review.
    It now scores the item itself when its deadline comes first (as it would have without the other)."""
    token = uuid.uuid4().hex
    program = f"import time\ntime.sleep(2)\nprint({token!r})"
    item = {"response": f"```python\n{program}\n```", "reference": {"cases": [{"stdout": token}]}}
    body = {"reward": "code", "items": [item], "options": {"timeout_s": 1}}
    async with make_app() as c:
        first, second = await asyncio.gather(c.post("/v1/score", json=body), c.post("/v1/score", json=body))
    (a,), (b,) = first.json()["results"], second.json()["results"]
    assert (a["score"], a["valid"], b["score"], b["valid"]) == (1.0, True, 1.0, True), (a, b)


def _code_item(token: str, sleep_s: float = 0) -> dict[str, Any]:
    program = f"import time\ntime.sleep({sleep_s})\nprint({token!r})"
    return {"response": f"```python\n{program}\n```", "reference": {"cases": [{"stdout": token}]}}


async def test_a_request_failing_while_it_scores_items_for_others_leaves_no_item_claimed(
    make_app: Any,
) -> None:
    """Single flight: a request that claimed items for the others (``_inflight``) and then failed while
    scoring (a 429 raised in the reward: the sandbox full) hands none of them over and removes every
    claim, so a later request holding those items scores them and the table does not grow. Here the
    first request runs ``x`` (the sandbox's one place); the second waits for ``x`` and claims ``y``,
    whose run the full sandbox refuses."""
    x, y = _code_item(f"x-{uuid.uuid4().hex}", sleep_s=3), _code_item(f"y-{uuid.uuid4().hex}")
    async with make_app(sandbox_workers=1, sandbox_queue_max_items=0) as c:
        scoring, sandbox = c.app.state.scoring, c.app.state.runtime.sandbox  # type: ignore[attr-defined]
        first = asyncio.create_task(c.post("/v1/score", json={"reward": "code", "items": [x]}))
        await until(lambda: sandbox.stats()["running"] == 1)  # x is running: the sandbox is full
        refused = await c.post("/v1/score", json={"reward": "code", "items": [x, y]})
        assert refused.status_code == 429, refused.text
        assert len(scoring._inflight) == 1  # x, the first request's: y's claim is gone
        done = await first
        assert scoring._inflight == {}
        later = await c.post("/v1/score", json={"reward": "code", "items": [x, y]})
    assert done.status_code == 200 and done.json()["results"][0]["score"] == 1.0, done.text
    assert [(r["score"], r["cached"]) for r in later.json()["results"]] == [(1.0, True), (1.0, False)]


async def test_an_item_of_a_group_reward_is_not_shared_with_another_tenants_group(make_app: Any) -> None:
    """Single flight shares only what the cache could hold, and a group reward's result depends on the
    other members: two API keys' groups "0" both hold the same item (same response, reference and group
    id), in the first request it is the majority's answer, in the second a minority's. The first is still
    scoring (its code part sleeps) when the second arrives; each gets its own group's vote."""
    token = uuid.uuid4().hex
    program = f"import time\ntime.sleep(2)\nprint({token!r})"
    same = {
        "response": f"```python\n{program}\n```\n\\boxed{{7}}",
        "reference": {"cases": [{"stdout": token}]},
        "group": "0",
    }
    reward = {
        "name": "composite",
        "config": {"components": [{"reward": "majority_vote"}, {"reward": "code"}]},
    }
    mine = [same, {"response": "\\boxed{7}", "reference": {"cases": [{"stdout": "x"}]}, "group": "0"}]
    theirs = [same] + [
        {"response": "\\boxed{8}", "reference": {"cases": [{"stdout": "x"}]}, "group": "0"} for _ in range(2)
    ]
    async with make_app(api_keys="team-a,team-b") as c:
        sandbox = c.app.state.runtime.sandbox  # type: ignore[attr-defined]
        first = asyncio.create_task(
            c.post("/v1/score", json={"reward": reward, "items": mine}, headers={"X-API-Key": "team-a"})
        )
        await until(lambda: sandbox.stats()["running"] >= 1)  # the first request is scoring its item
        second = await c.post(
            "/v1/score", json={"reward": reward, "items": theirs}, headers={"X-API-Key": "team-b"}
        )
        a = (await first).json()["results"][0]
    b = second.json()["results"][0]
    assert (a["components"]["majority_vote"], b["components"]["majority_vote"]) == (1.0, 0.0), (a, b)
    assert (a["components"]["code"], b["components"]["code"]) == (1.0, 1.0), (a, b)
    assert (a["cached"], b["cached"]) == (False, False)


async def test_a_request_waiting_for_an_item_gets_it_when_its_batch_ends_not_the_whole_request(
    make_app: Any,
) -> None:
    """Single flight: the request scoring an item handed its result to the waiting ones only when all of
    its batches had ended: a request waiting for a quick code item of a request whose other batch (here
    another config's program sleeping 60 s) ran long waited up to its own deadline and then scored the
    item again. Found in review. The item's result is now handed over as soon as its own batch ends; the
    long request is then cancelled (its client gone)."""
    x = _code_item(f"x-{uuid.uuid4().hex}", sleep_s=1)
    slow = {
        **_code_item(f"s-{uuid.uuid4().hex}", sleep_s=60),
        "reward": {"name": "code", "config": {"timeout_s": 90, "total_timeout_s": 90}},
    }
    async with make_app(sandbox_max_timeout_s=120) as c:
        scoring = c.app.state.scoring  # type: ignore[attr-defined]
        first = asyncio.create_task(c.post("/v1/score", json={"reward": "code", "items": [x, slow]}))
        await until(lambda: len(scoring._inflight) == 2)  # the first request is scoring both
        resp = await c.post("/v1/score", json={"reward": "code", "items": [x], "options": {"timeout_s": 20}})
        first.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await first
        assert scoring._inflight == {}
    (r,) = resp.json()["results"]
    assert (r["score"], r["cached"]) == (1.0, True), r


async def test_a_request_without_the_cache_neither_waits_for_nor_shares_an_item(make_app: Any) -> None:
    """``use_cache: false`` asks for the item scored now: single flight (a sharing of what the cache
    would hold) leaves such a request out, on both sides. The first request is still scoring the item
    (its program sleeps) when the second, identical, arrives: both score it."""
    x = _code_item(uuid.uuid4().hex, sleep_s=1)
    body = {"reward": "code", "items": [x], "options": {"use_cache": False}}
    async with make_app() as c:
        sandbox = c.app.state.runtime.sandbox  # type: ignore[attr-defined]
        first = asyncio.create_task(c.post("/v1/score", json=body))
        await until(lambda: sandbox.stats()["running"] >= 1)
        second = await c.post("/v1/score", json=body)
        results = [(await first).json()["results"][0], second.json()["results"][0]]
        metrics = (await c.get("/metrics")).text
    assert [(r["score"], r["cached"]) for r in results] == [(1.0, False), (1.0, False)], results
    assert 'rewardhub_reward_batch_latency_seconds_count{reward="code"} 2.0' in metrics


async def test_a_redis_down_at_start_is_logged() -> None:
    # A REWARDHUB_REDIS_URL that answers nothing at start (a typo, Redis not started yet) was logged by
    # no line of its own: the up transition logs `redis_state`, but a cache starting down never changed
    # state, so the service ran without its cache with only `cache_up=False` inside `service_ready`.
    from structlog.testing import capture_logs

    from conftest import free_port

    port = free_port()  # nothing listens there
    cache = RedisCache(f"redis://:secret@127.0.0.1:{port}/0", ttl_s=60, retry_interval_s=60)
    with capture_logs() as logs:
        await cache.start()
    try:
        assert cache.up is False
        states = [e for e in logs if e["event"] == "redis_state"]
        assert [(e["up"], e["log_level"]) for e in states] == [(False, "warning")], logs
        assert states[0]["url"] == f"redis://***@127.0.0.1:{port}/0"  # where, the password redacted
    finally:
        await cache.close()
