"""Start `rewardhub serve` in a subprocess for a benchmark, and basic machine facts for the report."""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("REWARDHUB_BENCH_DATA", ROOT.parent / "shared" / "benchmarks"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def server_process(
    env: dict[str, str] | None = None, workers: int = 1
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A `rewardhub serve` subprocess on a free port, ready; yields (url, process)."""
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rewardhub",
            "serve",
            "--port",
            str(port),
            "--workers",
            str(workers),
            "--log-level",
            "warning",
        ],
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=open(os.environ["BENCH_SERVER_LOG"], "wb")
        if os.environ.get("BENCH_SERVER_LOG")
        else subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("server did not become ready")
            time.sleep(0.1)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextlib.contextmanager
def server(env: dict[str, str] | None = None, workers: int = 1) -> Iterator[str]:
    with server_process(env, workers) as (url, _):
        yield url


def machine() -> str:
    cpu = "unknown cpu"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    gpu = ""
    if shutil.which("nvidia-smi"):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            names = subprocess.run(
                ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout.split("\n")
            gpu = ", GPU: " + " + ".join(n.strip() for n in names if n.strip())
    return (
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores ({cpu}), "
        f"Python {platform.python_version()}{gpu}"
    )
