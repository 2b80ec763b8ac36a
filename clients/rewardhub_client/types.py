"""Wire models of the rewardhub API, mirrored from the service field for field.

The client never imports the service: these models are written out again here so that the base
install (``pip install .`` in a clone, no extras) needs only httpx and pydantic. Unknown fields in
answers are kept (``extra="allow"``), so a newer service never breaks an older client.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "INVALID_REASONS",
    "ItemResult",
    "JobList",
    "JobState",
    "JobStatus",
    "CanaryReport",
    "JobSummary",
    "RewardCheck",
    "RewardInfo",
    "RewardSpec",
    "ScoreItem",
    "ScoreOptions",
    "ScoreRequest",
    "ScoreResponse",
    "ShadowResult",
    "ShadowSpec",
    "UnavailablePart",
]

# Reasons for which `score` is null: not the model's fault, a trainer masks these items.
INVALID_REASONS = frozenset(
    {
        "timeout",
        "parse_error",
        "missing_reference",
        "backend_error",
        "sandbox_error",
        "resource_limit",
        "unsupported",
        "internal_error",
    }
)


class _Out(BaseModel):
    model_config = ConfigDict(extra="allow")


class RewardSpec(BaseModel):
    """A reward by name with its configuration (see ``RewardClient.rewards()`` for the schemas).

    Other keys are kept and sent: the service refuses a key it does not know (``configs`` for ``config``)
    with :class:`~rewardhub_client.InvalidRequest`, where dropping it here scored with the default config.
    """

    model_config = ConfigDict(extra="allow")

    name: str
    config: dict[str, Any] = Field(default_factory=dict)


class ScoreItem(BaseModel):
    """One rollout to score."""

    response: str
    reference: str | dict[str, Any] | list[Any] | None = None
    prompt: str | None = None
    id: str | None = None
    group: str | None = None
    metadata: dict[str, Any] | None = None
    reward: str | RewardSpec | None = None


class ScoreOptions(BaseModel):
    use_cache: bool = True
    timeout_s: float | None = None
    include_details: bool = True
    group_size: int | None = None


class ShadowSpec(BaseModel):
    """A second reward the service runs on the same items to audit the first: each result then carries
    its ``shadow`` result and ``metrics["shadow"]`` counts where the two disagree; scores stay the
    primary reward's. A result passes when its ``correct`` component is 1, else when its score is at least
    ``threshold``. ``rewards``: shadow only the items whose reward has one of these names (the others'
    ``shadow`` is None), as a judge beside the math items of a mixed batch; default every item."""

    # other keys are kept and sent: the service refuses one it does not know ("treshold"), which dropped
    # here would score with the default threshold
    model_config = ConfigDict(extra="allow")

    reward: str | RewardSpec
    threshold: float = 0.5
    rewards: list[str] | None = None


class ScoreRequest(BaseModel):
    reward: str | RewardSpec | None = None
    items: list[ScoreItem]
    options: ScoreOptions = Field(default_factory=ScoreOptions)
    shadow: ShadowSpec | None = None


class _Scored(_Out):
    """What a reward answered for an item: the fields an item's result and its shadow's share."""

    reward: str
    score: float | None
    valid: bool
    reason: str | None = None
    components: dict[str, float | None] = Field(default_factory=dict)
    details: dict[str, Any] = Field(default_factory=dict)
    cached: bool = False
    reward_version: str = ""


class ShadowResult(_Scored):
    """The shadow reward's result for one item, and whether it agrees with the primary one (None when
    either could not score it)."""

    agree: bool | None = None
    # agree_pass, agree_fail, primary_only, shadow_only, primary_invalid or shadow_invalid
    outcome: str = ""


class ItemResult(_Scored):
    id: str
    latency_ms: float = 0.0
    shadow: ShadowResult | None = None


class ScoreResponse(_Out):
    request_id: str
    results: list[ItemResult]
    metrics: dict[str, Any] = Field(default_factory=dict)

    @property
    def scores(self) -> list[float | None]:
        """One score per item, ``None`` where the item could not be scored."""
        return [r.score for r in self.results]


class RewardInfo(_Out):
    name: str
    version: str
    description: str
    cacheable: bool
    reads: list[str] = Field(default_factory=list)
    config_schema: dict[str, Any] = Field(default_factory=dict)
    unavailable: str | None = None  # why it cannot score with its default backend (older servers: None)


class UnavailablePart(_Out):
    where: str  # "reward", "reward.config.components.0.reward", ...
    reward: str
    message: str  # why it cannot score there, naming the setting that would fix it


class CanaryReport(_Out):
    """The service's answer to ``POST /v1/canaries``: how many content-free "master key" responses the
    reward passed (``false_positives`` of ``scored``; ``ok`` when the rate is at most the maximum asked)."""

    reward: str
    reward_version: str = ""
    probes: int
    scored: int
    invalid: int = 0
    false_positives: int
    false_positive_rate: float | None = None
    ok: bool
    by_canary: dict[str, dict[str, Any]] = Field(default_factory=dict)
    examples: list[dict[str, Any]] = Field(default_factory=list)


class RewardCheck(_Out):
    """The service's answer to ``POST /v1/rewards/check``: what scoring with a spec would do."""

    name: str
    version: str
    cacheable: bool
    reads: list[str] = Field(default_factory=list)
    group_aware: bool = False
    timeout_s: float | None = None  # the per-item deadline scoring applies without options.timeout_s
    ok: bool
    unavailable: list[UnavailablePart] = Field(default_factory=list)


JobState = Literal["queued", "running", "succeeded", "failed", "cancelled"]


class JobSummary(_Out):
    """A job as :meth:`~rewardhub_client.RewardClient.list_jobs` lists it: no result (``job()`` has it)."""

    job_id: str
    # a state a newer service adds is read as its string, not refused (every read of the job would fail)
    status: JobState | str
    created_at: float
    started_at: float | None = None
    finished_at: float | None = None  # when it succeeded, failed or was cancelled
    items: int = 0
    error: dict[str, Any] | None = None

    @property
    def done(self) -> bool:
        """Whether the job has finished: succeeded, failed or cancelled (nothing changes it any more)."""
        return self.status in ("succeeded", "failed", "cancelled")


class JobStatus(JobSummary):
    """A job as :meth:`~rewardhub_client.RewardClient.job` answers it: its summary and, once it
    succeeded, its result."""

    result: ScoreResponse | None = None


class JobList(_Out):
    """The answer of ``GET /v1/jobs``: the caller's jobs, newest first."""

    data: list[JobSummary]
    has_more: bool = False
