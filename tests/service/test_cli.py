"""The ``rewardhub`` command line as a user reads it."""

from __future__ import annotations

import os
import re

import pytest
from typer.testing import CliRunner

from rewardhub import config
from rewardhub.cli import app


def test_serve_help_names_the_settings_and_defaults() -> None:
    # typer renders option help as rich markup, where "[env REWARDHUB_HOST, default 127.0.0.1]" is a
    # (unknown) style tag and vanished: --help said "Interface to bind ." and never named the variable.
    result = CliRunner().invoke(app, ["serve", "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    text = re.sub(r"[\s│]+", " ", result.output)  # the help box's wrapped lines, joined
    for expected in (
        "[env REWARDHUB_HOST, default 127.0.0.1]",
        "[env REWARDHUB_PORT, default 8000]",
        "[env REWARDHUB_WORKERS, default 1]",
        "[env REWARDHUB_REDIS_URL]",
    ):
        assert expected in text, f"{expected!r} missing from serve --help:\n{result.output}"


def test_serve_workers_share_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """`serve --workers 2` shared the cores between the workers' CPU pools but not their sandbox pools:
    each worker ran one program per core (twice the cores in all), so a program needing most of its
    CPU-time limit hit the same wall-clock deadline and failed its test, a cached timeout. Found in review."""
    import uvicorn

    from rewardhub.config import Settings

    # (serve sets variables for its workers: monkeypatch puts back what was there, and removes the rest)
    sets = (
        "REWARDHUB_WORKERS",
        "REWARDHUB_CPU_WORKERS",
        "REWARDHUB_SANDBOX_WORKERS",
        "REWARDHUB_MODEL_THREADS",
        "PROMETHEUS_MULTIPROC_DIR",
    )
    for name in [n for n in os.environ if n.startswith("REWARDHUB_")] + list(sets):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    monkeypatch.setenv("REWARDHUB_REDIS_URL", "redis://127.0.0.1:6379/0")
    monkeypatch.setattr(config.os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    monkeypatch.setattr(config, "cgroup_cpu_limit", lambda: None)
    seen: list[Settings] = []
    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: seen.append(Settings(_env_file=None)))  # type: ignore[call-arg]
    result = CliRunner().invoke(app, ["serve", "--workers", "2"])
    assert result.exit_code == 0, result.output
    (per_worker,) = seen
    assert per_worker.cpu_workers == 4 and per_worker.sandbox_workers == 4
    assert per_worker.model_threads == 3  # each worker's models: (8 cores - 2 event loops) / 2
    # a size the user chose is per worker, as documented, and left alone
    for name in sets:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("REWARDHUB_SANDBOX_WORKERS", "3")
    seen.clear()
    assert CliRunner().invoke(app, ["serve", "--workers", "2"]).exit_code == 0
    assert seen[0].sandbox_workers == 3
