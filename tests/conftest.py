"""Shared fixtures: real Redis, the real app with its lifespan, a real uvicorn server.

Nothing here is mocked. ``redis_server`` starts a private ``redis-server`` on a free port (so tests can
stop and restart it), ``make_app`` runs the app's lifespan (CPU workers, cache, rewards) around an
in-process ``httpx.AsyncClient``, and ``live_server`` starts ``rewardhub serve`` in a subprocess.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from rewardhub.app import create_app
from rewardhub.config import Settings
from waiting import until

ROOT = Path(__file__).resolve().parents[1]
SHARED_BENCHMARKS = ROOT.parent / "shared" / "benchmarks"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for(url: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError as exc:
            last = exc
        time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer within {timeout_s}s: {last}")


@dataclass
class RedisProcess:
    """A private redis-server the tests may stop and start again on the same port."""

    port: int
    binary: str
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2),
            ):
                return
            time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None

    def client(self) -> Any:
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port)


@pytest.fixture(scope="session")
def redis_process() -> Iterator[RedisProcess]:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed; scripts/test installs it (apt-get install redis-server)")
    server = RedisProcess(port=free_port(), binary=binary)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_server(redis_process: RedisProcess) -> RedisProcess:
    """The session's private redis-server, empty: what an earlier test left in it (a job handed back
    at its app's shutdown, which every later app with this Redis resumes and which then takes a place
    in that app's job queue; cache entries) is gone. Running, even if a test stopped it and failed
    before starting it again."""
    if redis_process.proc is None or redis_process.proc.poll() is not None:
        redis_process.stop()
        redis_process.start()
    with redis_process.client() as redis:
        redis.flushall()
    return redis_process


async def score_results(
    client: httpx.AsyncClient,
    reward: str,
    items: list[dict[str, Any]],
    *,
    options: dict[str, Any] | None = None,
    **config: Any,
) -> list[dict[str, Any]]:
    """``POST /v1/score`` of ``items`` with reward ``reward`` and ``config`` (and the request's
    ``options``, e.g. ``{"use_cache": False}``, when given): the results (the call must answer 200; an
    item's failure is in its result), one per item in order (tests check every result in a loop, which
    a shorter list, an empty one, would pass)."""
    body: dict[str, Any] = {"reward": {"name": reward, "config": config}, "items": items}
    if options is not None:
        body["options"] = options
    r = await client.post("/v1/score", json=body)
    assert r.status_code == 200, r.text
    results: list[dict[str, Any]] = r.json()["results"]
    assert len(results) == len(items), (len(results), len(items), results)
    for item, result in zip(items, results, strict=True):
        assert "id" not in item or result["id"] == item["id"], (item, result)
    return results


def slow_math_request(items: int, hold_s: float = 1.0) -> dict[str, Any]:
    """A /v1/score body whose ``items`` math items each hold a worker until their ``hold_s`` deadline (SymPy
    works on the power tower until the worker's alarm stops it): sent first, it keeps the service busy
    while a test asks for more than its quotas leave."""
    return {
        "reward": "math",
        "items": [{"response": "\\boxed{2^{2^{2^{2^{2^{2}}}}}}", "reference": "4"}] * items,
        "options": {"timeout_s": hold_s, "use_cache": False},
    }


async def hold_the_service(
    client: httpx.AsyncClient, items: int, hold_s: float = 1.0, headers: dict[str, str] | None = None
) -> asyncio.Task[httpx.Response]:
    """Send :func:`slow_math_request` and return its task once the service has admitted its items (they
    count against its in-flight bound and the caller's key quota), so that what the test sends next meets
    a full service. A fixed sleep before the next request was a race: on a loaded host the slow request
    could still be on its way in, and the next one was admitted."""
    admission = client.app.state.admission  # type: ignore[attr-defined]
    before = admission.items
    busy = asyncio.create_task(
        client.post("/v1/score", json=slow_math_request(items, hold_s), headers=headers)
    )
    await until(lambda: admission.items >= before + items or busy.done(), "the slow request was not admitted")
    assert not busy.done(), busy.result().text  # (it ended before the test could use it: refused, say)
    return busy


def make_settings(**overrides: Any) -> Settings:
    """Settings for tests: no .env file, small pools, everything else default."""
    values: dict[str, Any] = {"cpu_workers": 2, "log_level": "warning"}
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


@asynccontextmanager
async def running_app(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The real app with its lifespan, behind an in-process HTTP client."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://rewardhub.test", timeout=60
        ) as client:
            client.app = app  # type: ignore[attr-defined]
            yield client


@pytest.fixture
def make_app() -> Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]:
    """``async with make_app(redis_url=...) as client:`` — an app with these settings overrides."""

    def factory(**overrides: Any) -> AbstractAsyncContextManager[httpx.AsyncClient]:
        return running_app(make_settings(**overrides))

    return factory


@pytest.fixture(scope="session")
async def client() -> AsyncIterator[httpx.AsyncClient]:
    """A session-wide app on the embedded cache (for tests that don't care about cache state)."""
    async with running_app(make_settings()) as c:
        yield c


@dataclass
class LiveServer:
    url: str
    proc: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextlib.contextmanager
def serve(
    env: dict[str, str | None] | None = None,
    *,
    workers: int = 1,
    tmp: Path,
    cwd: Path | None = None,
    ready_timeout_s: float = 60,
) -> Iterator[LiveServer]:
    """Run ``rewardhub serve`` in a subprocess on a free port until the block ends (in ``cwd``, where a
    ``.env`` file would be read; an ``env`` value of None removes that variable). ``ready_timeout_s``:
    how long its start may take (each in-process model loads in a process of its own at start)."""
    port = free_port()
    log_path = tmp / f"server-{port}.log"
    merged = {**os.environ, "REWARDHUB_CPU_WORKERS": "2", **(env or {})}
    full_env = {k: v for k, v in merged.items() if v is not None}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rewardhub", "serve", "--port", str(port), "--workers", str(workers)],
            env=full_env,
            cwd=cwd,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    server = LiveServer(url=f"http://127.0.0.1:{port}", proc=proc, log_path=log_path)
    try:
        wait_for(f"{server.url}/ready", timeout_s=ready_timeout_s)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def live_server_factory(tmp_path: Path) -> Callable[..., contextlib.AbstractContextManager[LiveServer]]:
    def factory(
        env: dict[str, str | None] | None = None, workers: int = 1, cwd: Path | None = None
    ) -> contextlib.AbstractContextManager[LiveServer]:
        return serve(env, workers=workers, tmp=tmp_path, cwd=cwd)

    return factory


# --- model backends: tiny random models saved once per session, a scripted judge server per test ---
@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tiny-models")


@pytest.fixture(scope="session")
def qwen_prm_path(tiny_dir: Path) -> str:
    from tiny_models import build_tiny_qwen_prm

    return str(build_tiny_qwen_prm(tiny_dir / "qwen-prm"))


@pytest.fixture(scope="session")
def skywork_prm_path(tiny_dir: Path) -> str:
    from tiny_models import build_tiny_skywork_prm

    return str(build_tiny_skywork_prm(tiny_dir / "skywork-prm"))


@pytest.fixture(scope="session")
def shepherd_prm_path(tiny_dir: Path) -> str:
    from tiny_models import build_tiny_math_shepherd_prm

    return str(build_tiny_math_shepherd_prm(tiny_dir / "math-shepherd"))


@pytest.fixture(scope="session")
def rlhflow_prm_path(tiny_dir: Path) -> str:
    from tiny_models import build_tiny_rlhflow_prm

    return str(build_tiny_rlhflow_prm(tiny_dir / "rlhflow-prm"))


@pytest.fixture(scope="session")
def orm_path(tiny_dir: Path) -> str:
    from tiny_models import build_tiny_orm

    return str(build_tiny_orm(tiny_dir / "orm"))


@pytest.fixture(scope="session")
def causal_lm_path(tiny_dir: Path) -> str:
    from tiny_models import build_tiny_causal_lm

    return str(build_tiny_causal_lm(tiny_dir / "causal-lm"))


# What the scripted judge (scripted_lm_path) answers to anything: a ThinkPRM-style critique of one step
THINKPRM_SCRIPT = "Step 1: 2+2=4 is right. \\boxed{correct}\nIs the solution correct?Yes"


@pytest.fixture(scope="session")
def scripted_lm_path(tiny_dir: Path) -> str:
    """A tiny causal LM whose greedy reply is ``THINKPRM_SCRIPT`` (tiny_models.build_tiny_scripted_lm)."""
    from tiny_models import build_tiny_scripted_lm

    return str(build_tiny_scripted_lm(tiny_dir / "scripted-lm", THINKPRM_SCRIPT))


@pytest.fixture
def judge_server() -> Iterator[Any]:
    """A scripted OpenAI-compatible judge (tests/fake_openai.py) on a free port."""
    from fake_openai import fake_judge

    with fake_judge() as server:
        yield server
