"""structlog configuration: console lines for people, JSON lines (``REWARDHUB_LOG_JSON=true``) for shippers.

Request ids are bound with structlog's contextvars, so every line logged while serving a request
carries its ``request_id``.
"""

from __future__ import annotations

import logging
import sys

import structlog

__all__ = ["configure_logging"]


class _CurrentStderr:
    """Writes to whatever ``sys.stderr`` is now, not the object present at configuration time (test
    runners and embedders swap it; a logger holding the old, closed stream would crash)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure_logging(level: str = "info", json: bool = False) -> None:
    """structlog's lines, and with ``json`` every standard-library record too (uvicorn's "Started server
    process" and its errors, libraries' warnings) as one JSON object per line: a shipper that parses JSON
    lines got uvicorn's console lines between the service's (``rewardhub serve`` leaves uvicorn's loggers
    to the root handler set here in JSON mode)."""
    lvl = getattr(logging, level.upper(), logging.INFO)
    if json:
        handler = logging.StreamHandler(_CurrentStderr())
        handler.setFormatter(
            structlog.stdlib.ProcessorFormatter(
                foreign_pre_chain=[
                    structlog.contextvars.merge_contextvars,
                    structlog.processors.add_log_level,
                    structlog.stdlib.add_logger_name,
                    structlog.processors.TimeStamper(fmt="iso", utc=True),
                ],
                processors=[
                    structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.format_exc_info,
                    structlog.processors.JSONRenderer(),
                ],
            )
        )
        logging.basicConfig(handlers=[handler], level=lvl, force=True)
    else:
        logging.basicConfig(format="%(message)s", stream=sys.stderr, level=lvl, force=True)
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.PrintLoggerFactory(file=_CurrentStderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )
