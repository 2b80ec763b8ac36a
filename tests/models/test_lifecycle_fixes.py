"""Model lifecycle: a failed start-up stops what it started, a model process that dies while idle is
restarted before the next batch, a restart that fails turns readiness red, and backend configurations
that could never work are refused at start-up."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from conftest import make_settings, running_app
from rewardhub.models.model_process import ModelProcess
from rewardhub.models.specs import load_backends_file

MakeApp = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]


def _request(response: str) -> dict[str, Any]:
    return {
        "reward": "orm",
        "options": {"use_cache": False},
        "items": [{"prompt": "What is 2+2?", "response": response}],
    }


def _orm_process(client: httpx.AsyncClient) -> ModelProcess:
    process = client.app.state.runtime.models.get("orm")._process  # type: ignore[attr-defined]
    assert isinstance(process, ModelProcess)
    return process


async def _kill(process: ModelProcess) -> None:
    """The model process dies while idle (OOM killer, a segfault...); its exit status is collected."""
    proc = process._proc
    assert proc is not None and proc.pid is not None
    os.kill(proc.pid, signal.SIGKILL)
    await asyncio.to_thread(proc.join, 10)


# --- a failed start-up ------------------------------------------------------------------------------
def _descendants() -> dict[int, psutil.Process]:
    out = {}
    for p in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            if p.status() != psutil.STATUS_ZOMBIE:
                out[p.pid] = p
    return out


def _process_wide(p: psutil.Process) -> bool:
    """multiprocessing's forkserver and resource tracker outlive any one app (they serve the process)."""
    try:
        cmd = " ".join(p.cmdline())
        return p.ppid() == os.getpid() and ("forkserver" in cmd or "resource_tracker" in cmd)
    except psutil.NoSuchProcess:
        return True


async def test_a_failed_start_up_stops_the_processes_it_started(orm_path: str) -> None:
    """The cache cannot be built (a Redis URL without its scheme) after the model process, the CPU
    workers and the sandbox have started: all of them must be gone when the start-up error surfaces."""
    before = set(_descendants())
    # model_copy skips validation, so the bad URL reaches the lifespan even if settings learn to refuse it
    settings = make_settings(orm_model=orm_path, embedding_model="off").model_copy(
        update={"redis_url": "localhost:6379/11"}
    )
    left: list[psutil.Process] = []
    try:
        with pytest.raises(ValueError, match="scheme"):
            async with running_app(settings):
                pass
        deadline = time.monotonic() + 30  # exits on a loaded CI machine too (the loop ends when they do)
        while True:
            left = [p for pid, p in _descendants().items() if pid not in before and not _process_wide(p)]
            if not left or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
        assert not left, [" ".join(p.cmdline())[-80:] for p in left]
    finally:
        for p in left:  # on a regression: don't leave them to the rest of the session
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()


def test_a_redis_url_without_its_scheme_is_refused_when_settings_load() -> None:
    from pydantic import ValidationError

    from rewardhub.config import Settings

    with pytest.raises(ValidationError, match="REWARDHUB_REDIS_URL='localhost:6379/11': must start with"):
        Settings(redis_url="localhost:6379/11")
    assert Settings(redis_url="rediss://cache:6380/0").redis_url == "rediss://cache:6380/0"
    assert Settings(redis_url="").redis_url is None  # empty: the embedded cache, as unset


# --- a model process that dies -----------------------------------------------------------------------
async def test_a_model_process_that_died_idle_serves_the_next_batch(make_app: MakeApp, orm_path: str) -> None:
    async with make_app(orm_model=orm_path, embedding_model="off") as client:
        first = (await client.post("/v1/score", json=_request("4"))).json()["results"][0]
        assert first["valid"], first
        process = _orm_process(client)
        await _kill(process)  # idle: no batch in flight when it died (dead and reaped: no wait needed)
        after = (await client.post("/v1/score", json=_request("four"))).json()["results"][0]
        assert after["valid"], after  # served by a fresh process, not failed as backend_error
        assert process.restarts == 1
        # and alertable: counted in /metrics beside the CPU and sandbox pools' replaced workers
        metrics = (await client.get("/metrics")).text
        assert 'rewardhub_worker_restarts_total{cause="died",pool="model:orm"} 1.0' in metrics


async def test_a_failed_restart_makes_ready_fail_until_a_load_succeeds(
    make_app: MakeApp, orm_path: str, tmp_path: Path
) -> None:
    model = tmp_path / "orm"
    shutil.copytree(orm_path, model)
    async with make_app(orm_model=str(model), embedding_model="off") as client:
        assert (await client.post("/v1/score", json=_request("4"))).json()["results"][0]["valid"]
        assert (await client.get("/ready")).status_code == 200
        await _kill(_orm_process(client))
        model.rename(tmp_path / "moved")  # its files are gone too (volume unmounted): it cannot reload
        failed = (await client.post("/v1/score", json=_request("5"))).json()["results"][0]
        assert failed["reason"] == "backend_error"
        r = await client.get("/ready")
        check = r.json()["checks"]["model:orm"]
        assert r.status_code == 503 and check["ok"] is False and not check["loaded"]
        assert "restarting the model process failed" in check["error"]

        (tmp_path / "moved").rename(model)  # back: the next batch reloads it and readiness recovers
        assert (await client.post("/v1/score", json=_request("6"))).json()["results"][0]["valid"]
        r = await client.get("/ready")
        assert r.status_code == 200 and "error" not in r.json()["checks"]["model:orm"]


# --- configurations that cannot work ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "text"),
    [
        (
            "b.yaml",
            "backends:\n"
            "  judge:\n    kind: openai\n    url: http://a/v1\n    model: m1\n"
            "  judge:\n    kind: openai\n    url: http://b/v1\n    model: m2\n",
        ),
        (
            "b.json",
            '{"backends": {"judge": {"kind": "openai", "url": "http://a/v1", "model": "m1"},'
            ' "judge": {"kind": "openai", "url": "http://b/v1", "model": "m2"}}}',
        ),
    ],
)
def test_a_backend_defined_twice_in_the_file_is_refused(tmp_path: Path, name: str, text: str) -> None:
    f = tmp_path / name
    f.write_text(text)
    with pytest.raises(ValueError, match=rf"REWARDHUB_BACKENDS_FILE={f}: key 'judge' is defined twice"):
        load_backends_file(str(f))


def test_yaml_merge_keys_may_still_be_overridden(tmp_path: Path) -> None:
    """Only keys written twice are refused: a key given next to a ``<<`` merge overrides the merged one."""
    f = tmp_path / "b.yaml"
    f.write_text(
        "backends:\n  a: &base {kind: openai, url: 'http://a/v1', model: m1}\n"
        "  b:\n    <<: *base\n    model: m2\n"
    )
    specs = load_backends_file(str(f))
    assert specs["a"].model == "m1" and specs["b"].model == "m2"


def test_a_math_shepherd_prm_on_vllm_pooling_is_refused_in_the_file(tmp_path: Path) -> None:
    f = tmp_path / "b.yaml"
    f.write_text(
        "backends:\n  prm:\n    kind: vllm_pooling\n    url: http://prm:8000\n    model: m\n"
        "    convention: math_shepherd\n"
    )
    with pytest.raises(
        ValueError, match=r"backends\.prm.*convention math_shepherd .*needs kind transformers"
    ):
        load_backends_file(str(f))


async def test_a_math_shepherd_prm_url_fails_the_start_naming_the_settings() -> None:
    settings = make_settings(
        prm_url="http://127.0.0.1:9", prm_model="math-shepherd", prm_convention="math_shepherd"
    )
    with pytest.raises(ValueError, match="REWARDHUB_PRM_CONVENTION=math_shepherd .*REWARDHUB_PRM_URL"):
        async with running_app(settings):
            pass
