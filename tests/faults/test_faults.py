"""Fault injection: dependencies and workers die under load; requests keep succeeding."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from typing import Any

import httpx
import pytest

from waiting import until

TOWER = "2^{2^{2^{2^{2^{2}}}}}"


async def load(
    c: httpx.AsyncClient, stop: asyncio.Event, tag: str, failures: list[str], done: list[int]
) -> None:
    k = 0
    while not stop.is_set():
        items = [{"response": f"\\boxed{{{k + i}}}", "reference": str(k + i)} for i in range(16)]
        try:
            resp = await c.post("/v1/score", json={"reward": "math", "items": items})
            if resp.status_code != 200 or any(r["score"] != 1.0 for r in resp.json()["results"]):
                failures.append(f"{tag}: {resp.status_code} {resp.text[:200]}")
        except httpx.HTTPError as exc:
            failures.append(f"{tag}: {exc!r}")
        done.append(1)
        k += 16


async def test_redis_killed_during_load(make_app: Any, redis_server: Any) -> None:
    async with make_app(redis_url=redis_server.url, redis_retry_interval_s=0.2, redis_timeout_s=0.2) as c:
        stop, failures, done = asyncio.Event(), [], []
        workers = [asyncio.create_task(load(c, stop, f"client{i}", failures, done)) for i in range(8)]
        await until(lambda: len(done) >= 8, "no request was answered before Redis was killed")
        redis_server.stop()  # SIGKILL mid-load
        at_kill = len(done)
        await asyncio.sleep(1.5)  # (Redis stays down at least this long)
        # Requests kept flowing while Redis was down: two rounds of the eight clients, so at least one
        # request of each was sent after the kill (counting those answered in a fixed 1.5 s, with the
        # 0.5 s before the kill, asked a loaded host for a pace).
        await until(lambda: len(done) >= at_kill + 16, "requests stopped while Redis was down")
        redis_server.start()
        for _ in range(300):
            if (await c.get("/health")).json()["cache_up"]:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)
        stop.set()
        await asyncio.gather(*workers)
        assert failures == []  # not one failed request
        health = (await c.get("/health")).json()
        assert health["cache_up"] is True
        items = [{"response": "\\boxed{1}", "reference": "1", "id": "resume"}]
        await c.post("/v1/score", json={"reward": "math", "items": items})
        again = (await c.post("/v1/score", json={"reward": "math", "items": items})).json()
        assert again["results"][0]["cached"] is True  # caching resumed


async def test_cpu_worker_killed_mid_item(make_app: Any) -> None:
    async with make_app(item_timeout_s=20) as c:
        pool = c.app.state.runtime.cpu_pool  # type: ignore[attr-defined]
        pids_before = {s.proc.pid for s in pool._slots if s.proc is not None}
        hung = asyncio.create_task(
            c.post(
                "/v1/score",
                json={
                    "reward": "math",
                    "options": {"use_cache": False},
                    "items": [{"response": f"\\boxed{{{TOWER}}}", "reference": "4"}],
                },
            )
        )
        await until(lambda: any(s.busy and s.proc is not None for s in pool._slots), "no worker took it")
        busy = [s.proc.pid for s in pool._slots if s.busy and s.proc is not None]
        await asyncio.sleep(0.3)
        os.kill(busy[0], signal.SIGKILL)  # the worker dies (OOM killer, a segfault...)
        resp = await asyncio.wait_for(hung, timeout=10)  # far sooner than the 20 s deadline
        r = resp.json()["results"][0]
        assert resp.status_code == 200
        assert (r["valid"], r["reason"]) == (False, "resource_limit")
        # The pool replaced the worker and keeps scoring.
        ready = (await c.get("/ready")).json()["checks"]["cpu_pool"]
        assert ready["alive"] == ready["size"] and ready["restarts"].get("crash", 0) >= 1
        pids_after = {s.proc.pid for s in pool._slots if s.proc is not None}
        assert busy[0] not in pids_after and pids_after != pids_before
        ok = await c.post(
            "/v1/score", json={"reward": "math", "items": [{"response": "\\boxed{2}", "reference": "2"}]}
        )
        assert ok.json()["results"][0]["score"] == 1.0


@pytest.mark.integration
def test_json_logs_carry_request_ids(live_server_factory: Any) -> None:
    env = {"REWARDHUB_LOG_JSON": "true", "REWARDHUB_LOG_LEVEL": "debug"}
    with live_server_factory(env=env) as server:
        httpx.post(
            f"{server.url}/v1/score",
            headers={"X-Request-ID": "trace-abc-123"},
            json={"reward": "exact_match", "items": [{"response": "a", "reference": "a"}]},
            timeout=30,
        )
        httpx.post(
            f"{server.url}/v1/score", json={"reward": "nope", "items": [{"response": "a"}]}, timeout=30
        )
    lines = [json.loads(line) for line in server.log().splitlines() if line.startswith("{")]
    assert any(rec.get("event") == "service_ready" for rec in lines)
    traced = [rec for rec in lines if rec.get("request_id") == "trace-abc-123"]
    assert traced and traced[0]["path"] == "/v1/score" and traced[0]["status"] == 200
    assert all("timestamp" in rec and "level" in rec for rec in lines)


@pytest.mark.integration
@pytest.mark.parametrize("workers", [1, 2])
def test_json_logs_are_json_lines_only(live_server_factory: Any, workers: int) -> None:
    """REWARDHUB_LOG_JSON=true promises JSON lines for log shippers, but uvicorn's own lines ("Started
    server process", "Uvicorn running on ...", "Shutting down", and its errors) kept uvicorn's console
    format between the service's JSON lines; they are now JSON lines too."""
    env = {"REWARDHUB_LOG_JSON": "true"}
    with live_server_factory(env=env, workers=workers) as server:
        httpx.post(
            f"{server.url}/v1/score",
            json={"reward": "exact_match", "items": [{"response": "a", "reference": "a"}]},
            timeout=30,
        )
        server.proc.terminate()
        server.proc.wait(timeout=30)
    lines = [line for line in server.log().splitlines() if line.strip()]
    not_json = []
    for line in lines:
        try:
            json.loads(line)
        except ValueError:
            not_json.append(line)
    assert not not_json, not_json
    records = [json.loads(line) for line in lines]
    assert any("Uvicorn running on" in str(rec.get("event")) for rec in records), records
    assert all("timestamp" in rec and "level" in rec for rec in records), records


async def test_model_process_killed_mid_batch_is_rescored_not_failed(
    make_app: Any, qwen_prm_path: str
) -> None:
    """The out-of-memory killer takes the PRM's model process while a batch is in it. Every item of that
    batch came back backend_error; the batch is now retried item by item in a fresh process, and since no
    item caused the death, all are scored, with the same scores as before the kill."""
    items = [
        {"id": str(k), "prompt": "What is 2 + 2?", "response": f"2 + 2 = 4.\n\nStep {k}.\n\nSo \\boxed{{4}}."}
        for k in range(6)
    ]
    body = {"reward": "prm", "items": items, "options": {"use_cache": False}}
    async with make_app(prm_model=qwen_prm_path, item_timeout_s=120) as c:
        first = (await c.post("/v1/score", json=body)).json()["results"]
        assert all(r["valid"] for r in first), first
        backend = c.app.state.runtime.models.get("prm")  # type: ignore[attr-defined]
        batcher, pid = backend.batchers["steps"], backend._process._proc.pid
        passes = batcher.stats.batches
        os.kill(pid, signal.SIGSTOP)  # frozen, so the next batch is surely in it when it dies
        try:
            pending = asyncio.create_task(c.post("/v1/score", json=body))
            for _ in range(500):
                if batcher.stats.batches > passes:
                    break
                await asyncio.sleep(0.02)
            assert batcher.stats.batches == passes + 1, "the batch never reached the model process"
        finally:
            os.kill(pid, signal.SIGKILL)
        resp = await pending
        assert resp.status_code == 200
        again = resp.json()["results"]
        assert [r["valid"] for r in again] == [True] * 6, again
        assert [r["score"] for r in again] == pytest.approx([r["score"] for r in first], abs=1e-5)
        assert batcher.stats.splits == 1 and backend._process.restarts == 1
