"""The ``rewardhub`` command line as a user reads it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import free_port
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
        "[env REWARDHUB_LOG_LEVEL, default info]",  # the one option that named neither
        "[env REWARDHUB_REDIS_URL]",
    ):
        assert expected in text, f"{expected!r} missing from serve --help:\n{result.output}"


def test_rewards_lists_descriptions_as_written() -> None:
    # The table is rich output too: calibration's "1[correct] − (confidence − 1[correct])²" lost both
    # "[correct]" as unknown style tags and printed the wrong formula "1 − (confidence − 1)²".
    result = CliRunner().invoke(app, ["rewards"], terminal_width=400)
    assert result.exit_code == 0, result.output
    text = re.sub(r"[\s│]+", " ", result.output)
    assert "1[correct] − (confidence − 1[correct])²" in text, result.output


# What `serve` writes into its own environment for the workers to read.
_SERVE_SETS = (
    "REWARDHUB_WORKERS",
    "REWARDHUB_CPU_WORKERS",
    "REWARDHUB_SANDBOX_WORKERS",
    "REWARDHUB_MODEL_THREADS",
    "PROMETHEUS_MULTIPROC_DIR",
)


def _isolate_serve_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No REWARDHUB_* setting from outside, and whatever `serve` sets for its workers removed after the
    test: monkeypatch puts back what it touched, so every name serve may set is touched first (a
    REWARDHUB_WORKERS=2 left behind made every later test's app refuse jobs)."""
    for name in [n for n in os.environ if n.startswith("REWARDHUB_")] + list(_SERVE_SETS):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


def test_serve_workers_share_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """`serve --workers 2` shared the cores between the workers' CPU pools but not their sandbox pools:
    each worker ran one program per core (twice the cores in all), so a program needing most of its
    CPU-time limit hit the same wall-clock deadline and failed its test, a cached timeout. Found in review."""
    import uvicorn

    from rewardhub.config import Settings

    _isolate_serve_env(monkeypatch)
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
    for name in _SERVE_SETS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("REWARDHUB_SANDBOX_WORKERS", "3")
    seen.clear()
    assert CliRunner().invoke(app, ["serve", "--workers", "2"]).exit_code == 0
    assert seen[0].sandbox_workers == 3


def _serve(tmp_path: Path, env: dict[str, str], *args: str, code: str | None = None) -> tuple[int, list[str]]:
    """`rewardhub serve` in its own process (``code``: Python run first, in the same process): its exit
    status and its output lines, stderr and stdout together as a terminal shows them."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("REWARDHUB_")}
    clean.update(
        {
            "REWARDHUB_PORT": str(free_port()),
            "REWARDHUB_EMBEDDING_MODEL": "off",
            "REWARDHUB_CPU_WORKERS": "1",
            "REWARDHUB_SANDBOX_WORKERS": "1",
            **env,
        }
    )
    main = (
        f"{code}\nfrom rewardhub.cli import main\nmain()"
        if code
        else "from rewardhub.cli import main; main()"
    )
    out = subprocess.run(
        [sys.executable, "-c", main, "serve", *args],
        env=clean,
        cwd=tmp_path,  # no .env
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
    )
    return out.returncode, [line for line in out.stdout.splitlines() if line.strip()]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_configuration_error_ends_serve_with_its_message_alone(tmp_path: Path, workers: str) -> None:
    """A typo in the backends file (a missing model directory, a model of the wrong kind...) printed ~55
    lines of uvicorn's lifespan traceback before the one useful line; with --workers 2 the command then
    exited 0, so a supervisor saw a clean exit. Found in review."""
    f = tmp_path / "backends.yaml"
    f.write_text(
        "backends:\n  prm2:\n    kind: transformers\n    model: /m\n    task: generate\n    convnetion: qwen\n"
    )
    status, lines = _serve(tmp_path, {"REWARDHUB_BACKENDS_FILE": str(f)}, "--workers", workers)
    text = "\n".join(lines)
    assert status == 3, text
    assert "Traceback" not in text and 'File "' not in text, text
    assert lines[-1].startswith(
        f"rewardhub cannot start: REWARDHUB_BACKENDS_FILE={f}: backends.prm2.convnetion: "
    )
    if workers == "1":
        assert len(lines) <= 6, text


def test_a_start_up_bug_keeps_its_traceback(tmp_path: Path) -> None:
    """Only configuration errors are shortened: an exception that is a bug keeps the traceback that
    shows where it was raised, and the command still ends naming it, with a non-zero status."""
    bug = (
        "import rewardhub.sandbox\n"
        "async def broken(self):\n    raise RuntimeError('sandbox start is broken')\n"
        "rewardhub.sandbox.SandboxPool.start = broken\n"
    )
    status, lines = _serve(tmp_path, {}, code=bug)
    text = "\n".join(lines)
    assert status == 3, text
    assert "Traceback (most recent call last)" in text and "in broken" in text, text
    assert (
        lines[-1] == "rewardhub cannot start: RuntimeError: sandbox start is broken (the traceback is above)"
    )


def test_a_malformed_setting_is_named_without_a_traceback(tmp_path: Path) -> None:
    """REWARDHUB_CPU_WORKERS=abc (or a Redis URL without its scheme) printed a 40-line rich traceback of
    pydantic-settings' internals from `rewardhub serve`. The value itself is not echoed: a URL may hold a
    password. Found in review."""
    status, lines = _serve(tmp_path, {"REWARDHUB_CPU_WORKERS": "abc", "REWARDHUB_ITEM_TIMEOUT_S": "-"})
    text = "\n".join(lines)
    assert status == 2, text
    assert "Traceback" not in text and len(lines) == 1, text
    assert lines[-1] == (
        "rewardhub cannot start: REWARDHUB_CPU_WORKERS: Input should be a valid integer, unable to parse "
        "string as an integer; REWARDHUB_ITEM_TIMEOUT_S: Input should be a valid number, unable to parse "
        "string as a number"
    )
    status, lines = _serve(tmp_path, {"REWARDHUB_REDIS_URL": "user:s3cret@localhost:6379"})
    assert status == 2 and "s3cret" not in "\n".join(lines), lines
    assert lines == [
        "rewardhub cannot start: REWARDHUB_REDIS_URL='localhost:6379': must start with redis://, rediss:// "
        "or unix://"
    ]


def test_cache_max_entries_zero_stops_the_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """REWARDHUB_CACHE_MAX_ENTRIES=0 started the service with an embedded cache of 1 entry: neither the
    cache off nor a cache, and /metrics counted its lookups as a cache's. It is refused, naming the
    setting that does turn caching off."""
    import uvicorn

    _isolate_serve_env(monkeypatch)
    ran: list[object] = []
    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: ran.append(a))
    monkeypatch.setenv("REWARDHUB_CACHE_MAX_ENTRIES", "0")
    result = CliRunner().invoke(app, ["serve"], terminal_width=400)
    assert result.exit_code == 2 and not ran, result.output
    assert " ".join(result.output.split()) == (
        "rewardhub cannot start: REWARDHUB_CACHE_MAX_ENTRIES=0: the embedded cache holds at least 1 entry; "
        "to turn caching off, set REWARDHUB_CACHE_ENABLED=false"
    )
    monkeypatch.setenv("REWARDHUB_CACHE_MAX_ENTRIES", "1")
    assert config.Settings().cache_max_entries == 1


def test_a_missing_sql_fixtures_dir_stops_the_start(tmp_path: Path) -> None:
    """REWARDHUB_SQL_FIXTURES_DIR naming no directory (a typo, an unmounted volume) started the service,
    and every item naming a fixture came back invalid, missing_reference, for the whole run."""
    status, lines = _serve(tmp_path, {"REWARDHUB_SQL_FIXTURES_DIR": str(tmp_path / "fixtures")})
    assert status == 2, lines
    assert lines == [
        f"rewardhub cannot start: REWARDHUB_SQL_FIXTURES_DIR={str(tmp_path / 'fixtures')!r}: no such directory"
    ]


def test_several_workers_without_redis_warn_that_jobs_break(monkeypatch: pytest.MonkeyPatch) -> None:
    """With --workers 2 and no Redis each worker keeps its own jobs: a poll that reaches the other worker
    (a new connection after the 5 s keep-alive) answers 404 for a job that exists. The start-up warning
    spoke of the cache only."""
    import uvicorn

    _isolate_serve_env(monkeypatch)
    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: None)
    result = CliRunner().invoke(app, ["serve", "--workers", "2"], terminal_width=400)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "each worker caches on its own" in text and "jobs are refused (501" in text, text


def test_the_console_scripts_go_through_the_extra_checking_entry() -> None:
    """pyproject installs `rewardhub` and `rewardhub-train` with every install, the base one (the client)
    included; they start at rewardhub._entry, which needs no extra, not at the CLI modules, which do."""
    import tomllib

    scripts = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"][
        "scripts"
    ]
    assert scripts == {
        "rewardhub": "rewardhub._entry:rewardhub",
        "rewardhub-train": "rewardhub._entry:rewardhub_train",
    }


@pytest.mark.parametrize(
    ("entry", "args", "blocked", "install"),
    [
        ("rewardhub", ["version"], "typer", "scripts/bootstrap service"),
        ("rewardhub", ["version"], "rich", "scripts/bootstrap service"),
        ("rewardhub_train", ["show-config", "--help"], "typer", "scripts/bootstrap service,trainer"),
    ],
)
def test_a_command_without_its_extra_says_what_to_install(
    entry: str, args: list[str], blocked: str, install: str
) -> None:
    """After the base install (`pip install .`: the client, httpx and pydantic only), `rewardhub --help`
    ended in a ModuleNotFoundError traceback for typer. A package of the command's extra that is missing
    now ends it with one line, status 1: what is missing and the README's install command."""
    run = f"from rewardhub._entry import {entry}; {entry}()"
    ok = subprocess.run(
        [sys.executable, "-c", run, *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert ok.returncode == 0, ok.stderr  # with the extra installed, the command itself runs
    missing = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.modules[{blocked!r}] = None\n{run}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert missing.returncode == 1, missing.stderr
    assert "Traceback" not in missing.stderr and missing.stdout == "", missing.stderr
    [line] = missing.stderr.splitlines()
    assert f"{blocked} is not installed" in line and install in line, line
