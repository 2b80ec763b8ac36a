"""What the trainer adapters (:mod:`~rewardhub_client.slime`, :mod:`~rewardhub_client.verl`,
:mod:`~rewardhub_client.trl`) share: reading their options, and what a partly failed request keeps.

Each adapter names its own environment variables; an error names the one to fix.
"""

from __future__ import annotations

import os

from rewardhub_client.errors import RewardHubClientError
from rewardhub_client.types import ItemResult

__all__ = ["env_flag", "failure_mode", "partial_or_raise"]

_OFF = ("0", "false", "no", "off")


def env_flag(value: bool | None, env: str) -> bool:
    """An on/off option: ``value`` when given, else the environment variable ``env`` (on unless it is
    ``0``/``false``/``no``/``off``)."""
    if value is not None:
        return value
    return os.environ.get(env, "1").strip().lower() not in _OFF


def failure_mode(value: str | None, env: str) -> str:
    """The ``on_request_failure`` option (``value``, else the environment variable ``env``, else
    ``invalid``): ``"invalid"`` or ``"raise"``; a ``ValueError`` naming ``env`` for anything else."""
    failure = (value or os.environ.get(env) or "invalid").strip().lower()
    if failure not in ("invalid", "raise"):
        raise ValueError(f"on_request_failure ({env}) must be 'invalid' or 'raise', not {failure!r}")
    return failure


def partial_or_raise(exc: RewardHubClientError, on_request_failure: str) -> list[ItemResult | None]:
    """What a partly failed request keeps: its results in item order, ``None`` where its chunk failed.
    Raises ``exc`` with ``on_request_failure="raise"``, or when nothing was answered (a step on no signal
    must not pass silently)."""
    partial = exc.partial_results
    if on_request_failure == "raise" or partial is None or all(r is None for r in partial):
        raise exc
    return partial
