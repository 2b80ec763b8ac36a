"""The ``rewardhub`` command line: ``serve`` the API, list ``rewards``, print the ``version``."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rewardhub import __version__

__all__ = ["app", "main"]

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="rewardhub: reward-as-a-service for RL on LLMs."
)


@app.command()
def serve(
    host: Annotated[
        str | None, typer.Option(help="Interface to bind \\[env REWARDHUB_HOST, default 127.0.0.1].")
    ] = None,
    port: Annotated[int | None, typer.Option(help="TCP port \\[env REWARDHUB_PORT, default 8000].")] = None,
    workers: Annotated[
        int | None, typer.Option(help="uvicorn worker processes \\[env REWARDHUB_WORKERS, default 1].")
    ] = None,
    log_level: Annotated[
        str | None,
        typer.Option(help="debug | info | warning | error \\[env REWARDHUB_LOG_LEVEL, default info]."),
    ] = None,
    redis_url: Annotated[
        str | None,
        typer.Option(help="Use Redis as the cache \\[env REWARDHUB_REDIS_URL]; unset = in-process cache."),
    ] = None,
) -> None:
    """Run the HTTP service (uvicorn with uvloop and httptools)."""
    # (The option help escapes "[": typer renders it as rich markup, where "[env ...]" is a style tag
    # and would vanish from --help.)
    import uvicorn

    # Flags become environment variables so that every worker process reads the same settings.
    for name, value in (
        ("HOST", host),
        ("PORT", port),
        ("WORKERS", workers),
        ("LOG_LEVEL", log_level),
        ("REDIS_URL", redis_url),
    ):
        if value is not None:
            os.environ[f"REWARDHUB_{name}"] = str(value)
    from pydantic import ValidationError

    from rewardhub.config import Settings, available_cores

    try:
        settings = Settings()
    except ValidationError as exc:  # a bad REWARDHUB_* value: its name and the problem, not 40 frames
        _cannot_start("; ".join(_setting_problem(e) for e in exc.errors()), code=2)
    for hint in _unknown_settings(Settings, os.environ, _env_file_names(Settings)):
        typer.secho(f"warning: {hint}", fg=typer.colors.YELLOW, err=True)
    if settings.log_json:
        # uvicorn's own lines (start, stop, its errors) go to the root handler, which writes JSON lines
        # like the service's; uvicorn's console format would mix plain lines into them.
        from rewardhub.logging_setup import configure_logging

        configure_logging(settings.log_level, json=True)
    metrics_dir: str | None = None
    if settings.workers > 1:
        if not settings.redis_url:
            warning = (
                "several workers with the embedded cache: each worker caches on its own, and "
                "jobs are refused (501: each worker would keep its own, and a poll reaching another "
                "worker would answer 404); set REWARDHUB_REDIS_URL to share one cache and one job store."
                if not settings.job_redis_url
                else "several workers with the embedded cache: each worker caches on its own; set "
                "REWARDHUB_REDIS_URL to share one cache."
            )
            if settings.log_json:
                import structlog

                structlog.get_logger("rewardhub").warning("embedded_cache_with_workers", hint=warning)
            else:
                typer.secho(f"warning: {warning}", fg=typer.colors.YELLOW, err=True)
        if "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
            # ours to remove when the workers have stopped (one directory per start stayed in /tmp)
            metrics_dir = tempfile.mkdtemp(prefix="rewardhub-prom-")
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
        if "cpu_workers" not in settings.model_fields_set:
            # Share the machine's cores between the uvicorn workers' CPU pools. A size the user chose
            # (environment or .env) is per worker, as documented, and is left alone.
            os.environ["REWARDHUB_CPU_WORKERS"] = str(max(1, settings.cpu_workers // settings.workers))
        if "sandbox_workers" not in settings.model_fields_set:
            # Likewise the sandbox slots: each worker process has its own pool, and N workers with one
            # slot per core ran N programs per core, turning the CPU limits into wall-clock timeouts
            # (failed tests, cached) that a program alone would have passed.
            os.environ["REWARDHUB_SANDBOX_WORKERS"] = str(
                max(1, settings.sandbox_workers // settings.workers)
            )
        if "model_threads" not in settings.model_fields_set:
            # And the torch threads: every worker loads its own models, each with cores - 1 threads by
            # default, so two workers on 4 CPUs ran 6 model threads beside two event loops. Each worker
            # leaves one core to its event loop and takes its share of the rest.
            os.environ["REWARDHUB_MODEL_THREADS"] = str(
                max(1, (available_cores() - settings.workers) // settings.workers)
            )
    from uvicorn.config import LOGGING_CONFIG, STARTUP_FAILURE

    from rewardhub.middleware import STARTUP_FAILURE_FILE

    # A worker whose start-up fails writes why here (StartupFailureMiddleware): the reason is repeated as
    # the last line, and the exit status is non-zero with --workers too (uvicorn's parent exits 0 then).
    report = Path(tempfile.mkdtemp(prefix="rewardhub-start-"))
    os.environ[STARTUP_FAILURE_FILE] = str(report / "reason")
    try:
        uvicorn.run(
            "rewardhub.app:create_app",
            factory=True,
            host=settings.host,
            port=settings.port,
            workers=settings.workers,
            loop="uvloop",
            http="httptools",
            log_level=settings.log_level,
            access_log=False,
            log_config=None if settings.log_json else LOGGING_CONFIG,
            timeout_graceful_shutdown=30,
        )
    except SystemExit as exc:  # uvicorn's own exit after a failed start (status 3)
        if exc.code != STARTUP_FAILURE or not (report / "reason").exists():
            raise
    finally:
        reason = (report / "reason").read_text() if (report / "reason").exists() else None
        shutil.rmtree(report, ignore_errors=True)
        os.environ.pop(STARTUP_FAILURE_FILE, None)
        if metrics_dir is not None:
            shutil.rmtree(metrics_dir, ignore_errors=True)
            os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
    if reason is not None:
        _cannot_start(reason, code=STARTUP_FAILURE)


def _cannot_start(reason: str, code: int) -> NoReturn:
    typer.secho(f"rewardhub cannot start: {reason}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


# REWARDHUB_* names the clients and trainers read (they may share the service's shell): not settings.
_CLIENT_NAMES = ("REWARDHUB_URL", "REWARDHUB_API_KEY", "REWARDHUB_BENCH_DATA")
_CLIENT_PREFIXES = ("REWARDHUB_VERL_", "REWARDHUB_SLIME_", "REWARDHUB_OPENRLHF_")


def _unknown_settings(
    settings_cls: Any, environ: Any, env_file: Mapping[str, str] | None = None
) -> list[str]:
    """One line per ``REWARDHUB_*`` variable that is no setting (a typo such as ``REWARDHUB_PROT`` was
    ignored without a word: the service started on its default), with the closest setting's name: those
    of the environment, then those of the ``.env`` file (``env_file``: name -> the file it is in) that
    the environment does not also set."""
    import difflib

    known = [f"REWARDHUB_{name.upper()}" for name in settings_cls.model_fields]
    hints = []
    named = [(name, "") for name in sorted(environ)]
    named += [
        (name, f" (in {where})") for name, where in sorted((env_file or {}).items()) if name not in environ
    ]
    for name, where in named:
        upper = name.upper()
        if (
            not upper.startswith("REWARDHUB_")
            or upper in known
            or upper in _CLIENT_NAMES
            or upper.startswith(_CLIENT_PREFIXES)
        ):
            continue
        close = difflib.get_close_matches(upper, known, n=1)
        hints.append(
            f"{name}{where} is no rewardhub setting and is ignored"
            + (f" (did you mean {close[0]}?)" if close else "")
        )
    return hints


def _env_file_names(settings_cls: Any) -> dict[str, str]:
    """The names the settings' ``.env`` file(s) set, as pydantic-settings reads them (relative to the
    working directory; a file that is not there sets none): name -> the file."""
    from dotenv import dotenv_values

    files = settings_cls.model_config.get("env_file")
    if files is None:
        return {}
    paths = [files] if isinstance(files, str | os.PathLike) else list(files)
    encoding = settings_cls.model_config.get("env_file_encoding")
    names: dict[str, str] = {}
    for path in paths:
        file = Path(path).expanduser()
        if file.is_file():
            for name in dotenv_values(file, encoding=encoding):
                names.setdefault(name, str(path))
    return names


def _setting_problem(error: Any) -> str:
    """One validation error of the settings as ``REWARDHUB_<NAME>: <problem>`` (its value left out: it may
    be a URL with a password)."""
    loc = error.get("loc") or ("?",)
    variable = f"REWARDHUB_{str(loc[0]).upper()}"
    msg = str(error.get("msg", "invalid")).removeprefix("Value error, ")
    return msg if msg.startswith(variable) else f"{variable}: {msg}"


@app.command()
def rewards() -> None:
    """List the built-in rewards with their versions."""
    from rewardhub.rewards import load_builtin_rewards
    from rewardhub.rewards.base import registered

    load_builtin_rewards()
    table = Table("name", "version", "cached", "description")
    for name, cls in sorted(registered().items()):
        # Descriptions are plain text: "1[correct]" is no style tag.
        table.add_row(
            escape(name), escape(cls.version), "yes" if cls.cacheable else "no", escape(cls.description)
        )
    Console().print(table)


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(__version__)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
