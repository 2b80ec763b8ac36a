"""Service settings: the one place that reads the environment.

Every setting is an environment variable with the ``REWARDHUB_`` prefix (``REWARDHUB_REDIS_URL``,
``REWARDHUB_MAX_ITEMS``...), or a line in a ``.env`` file in the working directory. Defaults are the
embedded mode: no Redis (an in-process cache), CPU workers sized to the machine, limits that keep one
request from starving the others. Units are in the names (``_s`` seconds, ``_bytes``, ``_mb``).
"""

from __future__ import annotations

import os
from functools import lru_cache

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings", "get_settings", "parse_api_keys"]


def _default_cpu_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


class Settings(BaseSettings):
    """Configuration of one service process (each uvicorn worker reads the same environment)."""

    model_config = SettingsConfigDict(
        env_prefix="REWARDHUB_", env_file=".env", env_ignore_empty=True, extra="ignore"
    )

    # --- HTTP server (used by `rewardhub serve`; flags override) ---
    host: str = Field("127.0.0.1", description="Interface to bind.")
    port: int = Field(8000, ge=0, le=65535, description="TCP port.")
    workers: int = Field(1, ge=1, le=64, description="uvicorn worker processes.")
    log_level: str = Field("info", description="debug | info | warning | error.")
    log_json: bool = Field(
        False, description="Emit JSON log lines (for log shippers) instead of console lines."
    )

    # --- cache ---
    redis_url: str | None = Field(
        None, description="redis://host:port/db. Unset: the embedded in-process cache is used."
    )
    cache_enabled: bool = Field(True, description="Master switch for result caching.")
    cache_ttl_s: int = Field(7 * 24 * 3600, ge=1, description="Lifetime of a cached result, seconds.")
    cache_max_entries: int = Field(
        200_000, ge=0, description="Embedded cache size (entries); least recently used are evicted."
    )
    redis_timeout_s: float = Field(
        0.25, gt=0, description="Per-operation Redis socket timeout; a slower Redis counts as down."
    )
    redis_retry_interval_s: float = Field(
        1.0, gt=0, description="How often a down Redis is probed for reconnection, seconds."
    )

    # --- CPU verifier pool (math and other sympy/parsing work) ---
    cpu_workers: int = Field(
        default_factory=_default_cpu_workers,
        ge=1,
        description="Worker processes per service process for CPU-heavy verification.",
    )
    cpu_worker_memory_mb: int = Field(
        2048, ge=128, description="Address-space limit (RLIMIT_AS) of each CPU worker, MiB."
    )
    cpu_worker_max_items: int = Field(
        20_000, ge=1, description="A CPU worker is replaced after this many items (bounds memory growth)."
    )
    cpu_queue_max_items: int = Field(
        100_000, ge=1, description="Items waiting for the CPU pool before requests get 429."
    )
    item_timeout_s: float = Field(
        5.0, gt=0, description="Default hard deadline per item of CPU verification, seconds."
    )
    max_item_timeout_s: float = Field(
        60.0, gt=0, description="Upper bound on a per-request `options.timeout_s`, seconds."
    )

    # --- access and admission ---
    api_keys: str | None = Field(
        None,
        description="Comma-separated API keys accepted as `Authorization: Bearer <key>` or `X-API-Key`. "
        "Unset: the API is open (a warning is logged at start).",
    )
    per_key_max_concurrency: int = Field(
        0, ge=0, description="Requests in flight per API key before 429 (0 = no per-key quota)."
    )
    max_inflight_items: int = Field(
        200_000, ge=1, description="Items being scored at once across all requests before 429."
    )

    compat_default_reward: str = Field(
        "math",
        description="Reward used by the compat endpoints (OpenRLHF, slime, NeMo Gym) when a label names none.",
    )

    # --- async jobs ---
    job_concurrency: int = Field(2, ge=1, description="Jobs scored at once per service process.")
    job_ttl_s: int = Field(86_400, ge=60, description="How long a job and its result are kept, seconds.")
    job_max_items: int = Field(100_000, ge=1, description="Most items in one job.")
    job_queue_max: int = Field(1_000, ge=1, description="Jobs waiting to run before submissions get 429.")

    # --- request limits ---
    max_items: int = Field(4096, ge=1, description="Most items in one /v1/score request.")
    max_field_bytes: int = Field(
        1 << 20, ge=1, description="Most bytes in one text field (response, prompt, reference) of an item."
    )
    max_request_bytes: int = Field(64 << 20, ge=1, description="Most bytes in one request body.")

    @field_validator("log_level")
    @classmethod
    def _check_level(cls, v: str) -> str:
        v = v.lower()
        if v not in {"debug", "info", "warning", "error", "critical"}:
            raise ValueError("log_level must be one of debug, info, warning, error, critical")
        return v


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings, read once (tests build their own ``Settings`` and pass it to the app)."""
    return Settings()


def parse_api_keys(raw: str | None) -> tuple[str, ...]:
    """The configured API keys (comma-separated, surrounding spaces ignored, empties dropped)."""
    if not raw:
        return ()
    return tuple(k.strip() for k in raw.split(",") if k.strip())
