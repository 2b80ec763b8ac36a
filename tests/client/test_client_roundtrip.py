"""The client against the real service: in process (ASGI transport) and over TCP (a live server)."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx
import pytest

from rewardhub_client import (
    AsyncRewardClient,
    InvalidRequest,
    LimitExceeded,
    PayloadTooLarge,
    RewardClient,
    ScoreItem,
    UnknownReward,
)
from rewardhub_client._core import chunk_indices


def math_items(n: int, groups: int = 0) -> list[dict[str, Any]]:
    items = []
    for i in range(n):
        item: dict[str, Any] = {
            "id": f"m{i}",
            "response": f"\\boxed{{{i}}}",
            "reference": str(i if i % 3 else i + 1),
        }
        if groups:
            item["group"] = f"g{i % groups}"
        items.append(item)
    return items


def expected(n: int) -> list[float]:
    return [0.0 if i % 3 == 0 else 1.0 for i in range(n)]


async def test_in_process_round_trip(client: httpx.AsyncClient) -> None:
    transport = httpx.ASGITransport(app=client.app)  # type: ignore[attr-defined]
    async with AsyncRewardClient("http://rewardhub.test", transport=transport, chunk_size=7) as c:
        assert await c.ready()
        rewards = {r.name for r in await c.rewards()}
        assert {"math", "exact_match"} <= rewards
        resp = await c.score(math_items(30), "math")
        assert [r.id for r in resp.results] == [f"m{i}" for i in range(30)]
        assert resp.scores == expected(30)
        assert len(resp.metrics["chunks"]) == 5 and resp.metrics["items"] == 30
        # A merged answer keeps a top-level latency (TRL logs it): the whole call's, at least each chunk's.
        chunk_ms = [float(m["latency_ms"]) for m in resp.metrics["chunks"]]
        assert resp.metrics["latency_ms"] >= max(chunk_ms) > 0
        one = await c.score_one("The answer is \\boxed{2}", "2", "math")
        assert one.score == 1.0 and one.valid
        with pytest.raises(UnknownReward):
            await c.score([{"response": "x"}], "no_such_reward")
        job = await c.submit_job(math_items(4), "math")
        done = await c.wait_job(job.job_id, timeout_s=30)
        assert done.status == "succeeded" and done.result is not None
        assert done.result.scores == expected(4)


def test_chunking_never_splits_a_group() -> None:
    items = [ScoreItem.model_validate(it) for it in math_items(20, groups=4)]  # g0..g3 interleaved, 5 each
    chunks = chunk_indices(items, chunk_size=6)
    for chunk in chunks:
        groups = {items[i].group for i in chunk}
        for g in groups:  # every member of a group in the chunk that holds it
            assert all(i in chunk for i in range(20) if items[i].group == g)
    assert sorted(i for c in chunks for i in c) == list(range(20))
    big = chunk_indices([ScoreItem(response="x", group="one")] * 10, chunk_size=3)
    assert big == [list(range(10))]  # a group larger than a chunk travels alone, whole


@pytest.mark.integration
def test_sync_and_async_against_a_live_server(live_server_factory: Any) -> None:
    import asyncio

    with live_server_factory() as server:
        with RewardClient(server.url, chunk_size=8) as c:
            c.wait_until_ready(timeout_s=30)
            resp = c.score(math_items(40, groups=5), "math")
            assert resp.scores == expected(40)
            assert resp.metrics["latency_ms"] >= max(m["latency_ms"] for m in resp.metrics["chunks"])
            again = c.score(math_items(40, groups=5), "math")
            assert all(r.cached for r in again.results)
            assert c.health()["status"] == "ok"

        async def run() -> None:
            async with AsyncRewardClient(server.url, chunk_size=8, max_concurrency=3) as ac:
                r = await ac.score(math_items(40), "math", use_cache=False)
                assert r.scores == expected(40) and not any(x.cached for x in r.results)

        asyncio.run(run())


@pytest.mark.integration
def test_an_async_client_serves_each_event_loop_it_is_used_on(live_server_factory: Any) -> None:
    # An httpx pool belongs to the loop its connections were opened on: a client readied with
    # asyncio.run(...) and then used on another loop (the next asyncio.run, TRL's daemon loop) reused a
    # connection of the closed loop and raised RuntimeError("Event loop is closed") on every call.
    import asyncio
    import threading

    with live_server_factory() as server:
        ac = AsyncRewardClient(server.url)
        asyncio.run(ac.wait_until_ready(timeout_s=30))
        assert asyncio.run(ac.score(math_items(3), "math")).scores == expected(3)
        assert asyncio.run(ac.score(math_items(3), "math")).scores == expected(3)
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        try:
            scored = asyncio.run_coroutine_threadsafe(ac.score(math_items(3), "math"), loop).result(30)
            assert scored.scores == expected(3)
            asyncio.run_coroutine_threadsafe(ac.aclose(), loop).result(30)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            loop.close()


_FORKED: dict[str, RewardClient] = {}


def _score_in_child(k: int) -> list[float | None]:
    client = _FORKED["client"]
    return [client.score([math_items(k + 1)[k]], "math").scores[0] for _ in range(5)]


@pytest.mark.integration
@pytest.mark.timeout(90)
def test_a_sync_client_used_before_a_fork_works_in_the_children(live_server_factory: Any) -> None:
    # A module-level client that had scored once in the parent handed its kept-alive connection to every
    # forked child (multiprocessing's default on Linux): the children wrote their requests down one
    # socket and read each other's answers, and the pool hung. A child now opens its own connections.
    import multiprocessing

    with live_server_factory() as server, RewardClient(server.url) as c:
        c.wait_until_ready(timeout_s=30)
        assert c.score(math_items(3), "math").scores == expected(3)
        _FORKED["client"] = c
        try:
            with multiprocessing.get_context("fork").Pool(3) as pool:
                got = pool.map_async(_score_in_child, range(1, 7)).get(60)
        finally:
            _FORKED.clear()
        assert got == [[expected(k + 1)[k]] * 5 for k in range(1, 7)]
        assert c.score(math_items(3), "math").scores == expected(3)  # the parent's own connection still works


async def test_default_ids_are_batch_indices_when_chunked(client: httpx.AsyncClient) -> None:
    # Chunking is invisible: an item without an id gets its index in the batch, not in its chunk.
    transport = httpx.ASGITransport(app=client.app)  # type: ignore[attr-defined]
    items: list[dict[str, Any]] = [{"response": f"\\boxed{{{i}}}", "reference": "1"} for i in range(7)]
    items[3]["id"] = "mine"
    async with AsyncRewardClient("http://rewardhub.test", transport=transport, chunk_size=3) as c:
        resp = await c.score(items, "math")
    assert [r.id for r in resp.results] == ["0", "1", "2", "mine", "4", "5", "6"]
    assert resp.scores == [0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]


def padded_items(n: int, groups: int) -> list[dict[str, Any]]:
    """``math_items`` with a 2 KB response each (about 2.1 KB of JSON per item)."""
    return [{**it, "response": "x" * 2000 + it["response"]} for it in math_items(n, groups)]


class _Sizes(httpx.AsyncBaseTransport):
    """The app's ASGI transport, noting each /v1/score body's item groups."""

    def __init__(self, app: object) -> None:
        self.inner = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        self.sent: list[list[str]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/score":
            self.sent.append([it.get("group") for it in json.loads(await request.aread())["items"]])
        return await self.inner.handle_async_request(request)


async def test_a_chunk_over_the_byte_limit_is_split(
    make_app: Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]],
) -> None:
    # "Any size": a batch within chunk_size but over REWARDHUB_MAX_REQUEST_BYTES (long completions) failed
    # whole with PayloadTooLarge. Now the refused chunk is sent again in halves, groups still whole.
    async with make_app(max_request_bytes=30_000) as app:
        transport = _Sizes(app.app)  # type: ignore[attr-defined]
        async with AsyncRewardClient("http://rewardhub.test", transport=transport) as c:
            resp = await c.score(padded_items(40, groups=8), "math")  # 8 groups of 5, about 85 KB
            assert [r.id for r in resp.results] == [f"m{i}" for i in range(40)]
            assert resp.scores == expected(40)
            accepted = [groups for groups in transport.sent if len(groups) <= 10]
            assert sorted(g for groups in accepted for g in groups) == sorted(f"g{i % 8}" for i in range(40))
            for groups in accepted:  # every group whole in one request
                assert all(groups.count(g) == 5 for g in groups)
            # one group over the limit cannot be split: the 413 is the answer
            with pytest.raises(PayloadTooLarge):
                await c.score(padded_items(20, groups=1), "math")


async def test_a_misspelt_reward_spec_key_is_refused_not_dropped(client: httpx.AsyncClient) -> None:
    # The service refuses a spec key it does not know ("configs" for "config"); the client's RewardSpec
    # dropped it on the way, so the batch was scored with the default config, the caller none the wiser.
    transport = httpx.ASGITransport(app=client.app)  # type: ignore[attr-defined]
    items = [{"response": "The Cat.", "reference": "cat"}]
    squad = {"name": "exact_match", "configs": {"normalize": "squad"}}
    async with AsyncRewardClient("http://rewardhub.test", transport=transport) as c:
        with pytest.raises(InvalidRequest):
            await c.score(items, squad)
        with pytest.raises(InvalidRequest):
            await c.score([{**items[0], "reward": squad}])
        with pytest.raises(InvalidRequest):
            await c.check(squad)
        # config= merged into a spec keeps the spec's other keys
        with pytest.raises(InvalidRequest):
            await c.score(items, squad, config={"case_sensitive": False})
        spelt = await c.score(items, {"name": "exact_match", "config": {"normalize": "squad"}})
        assert spelt.scores == [1.0]


async def test_a_chunk_over_the_item_limit_is_split(
    make_app: Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]],
) -> None:
    # "Any size": a service whose REWARDHUB_MAX_ITEMS is below the client's chunk_size (1024 by default, as
    # the TRL and verl adapters and the trainer use it) refused every larger batch whole (LimitExceeded).
    # It is split as a chunk over the byte limit is, groups still whole.
    async with make_app(max_items=12) as app:
        transport = _Sizes(app.app)  # type: ignore[attr-defined]
        async with AsyncRewardClient("http://rewardhub.test", transport=transport) as c:
            resp = await c.score(math_items(40, groups=8), "math")  # 8 groups of 5
            assert [r.id for r in resp.results] == [f"m{i}" for i in range(40)]
            assert resp.scores == expected(40)
            accepted = [groups for groups in transport.sent if len(groups) <= 12]
            assert sorted(g for groups in accepted for g in groups) == sorted(f"g{i % 8}" for i in range(40))
            for groups in accepted:  # every group whole in one request
                assert all(groups.count(g) == 5 for g in groups)
            # one group over the limit cannot be split: the 422 is the answer
            with pytest.raises(LimitExceeded):
                await c.score(math_items(20, groups=1), "math")


async def test_an_error_about_an_item_of_a_chunk_names_it_by_its_place_in_the_batch(
    make_app: Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]],
) -> None:
    # The service numbers items within its request: in a batch sent in chunks of 4, item 6's over-long
    # response was reported as "items.2.response", the param and message naming another item (item 2,
    # fine) of the caller's batch.
    async with make_app(max_field_bytes=1000) as app:
        transport = httpx.ASGITransport(app=app.app)  # type: ignore[attr-defined]
        items = math_items(10)
        items[6]["response"] = "x" * 2000
        async with AsyncRewardClient("http://rewardhub.test", transport=transport, chunk_size=4) as c:
            with pytest.raises(LimitExceeded) as info:
                await c.score(items, "math")
            assert info.value.param == "items.6.response"
            assert "items.6.response" in info.value.message and "items.2" not in str(info.value)
            items[6]["response"] = "\\boxed{6}"
            items[9]["reward"] = {"name": "exact_match", "configs": {}}  # a misspelt per-item spec
            with pytest.raises(InvalidRequest) as bad:
                await c.score(items, "math")
            assert bad.value.param is not None and bad.value.param.startswith("items.9.reward")
            with pytest.raises(LimitExceeded) as alone:  # one chunk: the service's own numbering is right
                await c.score([{"response": "x" * 2000}], "math")
            assert alone.value.param == "items.0.response"
