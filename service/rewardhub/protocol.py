"""Wire models of the native API (``/v1/score``, ``/v1/rewards``).

The client package mirrors these models field for field without importing them. Results follow one
contract for every reward kind:

* ``score`` is a float when the item was scored and ``null`` when it could not be;
* ``valid`` is ``false`` exactly when ``score`` is ``null``;
* ``reason`` says why an item is invalid (:class:`Reason`), or, for a valid score at the reward's floor
  (``0.0``; -1 for ``similarity`` on its cosine scale), why the model lost the point (``no_answer``,
  ``format``);
* a cached result is identical to a fresh one except ``cached: true`` (and its ``latency_ms``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "INVALID_REASONS",
    "CanaryItem",
    "CanaryRequest",
    "CanaryResponse",
    "HealthResponse",
    "JobList",
    "JobState",
    "JobStatus",
    "JobSummary",
    "ItemResult",
    "Reason",
    "ReadyResponse",
    "RewardCheckRequest",
    "RewardCheckResponse",
    "RewardInfo",
    "RewardSpec",
    "RewardsResponse",
    "UnavailablePart",
    "ScoreItem",
    "ScoreOptions",
    "ScoreRequest",
    "ScoreResponse",
    "ShadowResult",
    "ShadowSpec",
]


class Reason(StrEnum):
    """The closed list of reason codes.

    Invalid (``score: null``) — not the model's fault, the trainer should mask the item:
    ``timeout`` (the per-item deadline passed), ``parse_error`` (the reference could not be read),
    ``missing_reference`` (the reward needs a reference and the item has none), ``backend_error`` (a model
    backend failed), ``sandbox_error`` (the sandbox failed, not the program), ``resource_limit`` (a worker
    ran out of memory or crashed), ``unsupported`` (the item asks for something this reward cannot do),
    ``internal_error`` (a bug: please report it).

    Valid, the reward's floor (``0.0``; ``similarity``'s cosine scale: -1) — the model's fault:
    ``no_answer`` (no answer could be extracted), ``format`` (the response does not have the required
    format).
    """

    TIMEOUT = "timeout"
    PARSE_ERROR = "parse_error"
    MISSING_REFERENCE = "missing_reference"
    BACKEND_ERROR = "backend_error"
    SANDBOX_ERROR = "sandbox_error"
    RESOURCE_LIMIT = "resource_limit"
    UNSUPPORTED = "unsupported"
    INTERNAL_ERROR = "internal_error"
    NO_ANSWER = "no_answer"
    FORMAT = "format"


INVALID_REASONS = frozenset(
    {
        Reason.TIMEOUT,
        Reason.PARSE_ERROR,
        Reason.MISSING_REFERENCE,
        Reason.BACKEND_ERROR,
        Reason.SANDBOX_ERROR,
        Reason.RESOURCE_LIMIT,
        Reason.UNSUPPORTED,
        Reason.INTERNAL_ERROR,
    }
)

# Invalid reasons that are a property of the moment, not of the item: a later try may score it.
TRANSIENT_REASONS = frozenset(
    {Reason.TIMEOUT, Reason.BACKEND_ERROR, Reason.SANDBOX_ERROR, Reason.RESOURCE_LIMIT, Reason.INTERNAL_ERROR}
)

JSONValue = Any


class _Model(BaseModel):
    # Unknown fields are ignored (a newer client may send more) rather than rejected.
    model_config = ConfigDict(extra="ignore")


class RewardSpec(_Model):
    """A reward by name with its configuration."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        min_length=1, max_length=128, description="Registered reward name, see GET /v1/rewards."
    )
    config: dict[str, JSONValue] = Field(
        default_factory=dict, description="Reward configuration; its JSON schema is in GET /v1/rewards."
    )


class ScoreItem(_Model):
    """One rollout to score."""

    id: str | None = Field(None, max_length=256, description="Echoed back; defaults to the item's index.")
    prompt: str | None = Field(None, description="The prompt (some rewards read it, e.g. judges).")
    response: str = Field(description="The model's response text.")
    reference: str | dict[str, JSONValue] | list[JSONValue] | None = Field(
        None,
        description="Gold answer: a string, or a JSON object for rewards that need more (tests, schema...).",
    )
    group: str | None = Field(
        None, max_length=256, description="Group id: items sharing it are one GRPO group (same prompt)."
    )
    metadata: dict[str, JSONValue] | None = Field(
        None,
        description="Free-form facts about the rollout (completion_tokens, completion_ids, correct...): read "
        "by the rewards that use them (length, repetition, group_length, pairwise judge) and then part of "
        "their cache key; not echoed in the result.",
    )
    reward: str | RewardSpec | None = Field(
        None, description="Per-item reward override, for mixed-domain batches."
    )


class ScoreOptions(_Model):
    use_cache: bool = Field(True, description="Read and write the result cache.")
    timeout_s: float | None = Field(
        None, gt=0, description="Per-item deadline for this request, seconds (capped by the server)."
    )
    include_details: bool = Field(True, description="Return `details` (extracted answers, test logs...).")
    group_size: int | None = Field(
        None,
        ge=1,
        description="Every group (items sharing `group`) must have exactly this many items, else 422.",
    )


class ShadowSpec(_Model):
    """A second reward run on the same items to audit the first (shadow verification)."""

    model_config = ConfigDict(extra="forbid")

    reward: str | RewardSpec = Field(
        description="The shadow reward (a judge beside `math`, a second rule verifier...), for every item "
        "(or those `rewards` picks)."
    )
    threshold: float = Field(
        0.5,
        allow_inf_nan=False,
        description="A result passes when its `correct` component is 1, or, without one, when its score is at "
        "least this; two results agree when both pass or both fail.",
    )
    rewards: list[str] | None = Field(
        None,
        min_length=1,
        description="Shadow only the items whose reward (the item's own, else the request's) has one of these "
        "names, as a judge beside the `math` items of a mixed math and code batch; the others' `shadow` is null "
        "and they are not counted. Default: every item.",
    )


class ScoreRequest(_Model):
    reward: str | RewardSpec | None = Field(
        None, description="The reward for every item without its own `reward`."
    )
    items: list[ScoreItem] = Field(description="Rollouts to score; results come back in the same order.")
    options: ScoreOptions = Field(default_factory=ScoreOptions)
    shadow: ShadowSpec | None = Field(
        None,
        description="Also score every item (or those `shadow.rewards` picks) with this reward and report "
        "where it disagrees (each result's `shadow`, `metrics.shadow`); the scores stay the primary reward's.",
    )

    @property
    def work(self) -> int:
        """Items to score, as admission control counts them: a shadowed item twice."""
        return len(self.items) + len(self.shadowed())

    def shadowed(self) -> list[int]:
        """The indices of the items the shadow reward scores (none without ``shadow``)."""
        if self.shadow is None:
            return []
        if self.shadow.rewards is None:
            return list(range(len(self.items)))
        wanted = set(self.shadow.rewards)
        return [i for i, item in enumerate(self.items) if _spec_name(item.reward or self.reward) in wanted]


def _spec_name(spec: str | RewardSpec | None) -> str | None:
    return spec.name if isinstance(spec, RewardSpec) else spec


class ShadowResult(_Model):
    reward: str
    score: float | None
    valid: bool
    reason: Reason | None
    components: dict[str, float | None] = Field(default_factory=dict)
    details: dict[str, JSONValue] = Field(default_factory=dict)
    cached: bool
    reward_version: str
    agree: bool | None = Field(
        description="Both pass or both fail (`ShadowSpec.threshold`); null when either could not score."
    )
    outcome: Literal[
        "agree_pass", "agree_fail", "primary_only", "shadow_only", "primary_invalid", "shadow_invalid"
    ] = Field(
        description="Which: both pass, both fail, only the primary passes, only the shadow does, or the "
        "primary (first) or the shadow could not score the item."
    )


class ItemResult(_Model):
    id: str = Field(description="The item's id, or its index as a string.")
    reward: str = Field(description="The reward that scored it.")
    score: float | None = Field(description="The reward; null when the item could not be scored.")
    valid: bool = Field(description="False exactly when score is null.")
    reason: Reason | None = Field(description="Why it is invalid, or why a valid item scored 0.")
    components: dict[str, float | None] = Field(default_factory=dict, description="Named sub-scores.")
    details: dict[str, JSONValue] = Field(default_factory=dict, description="What a person needs to see why.")
    cached: bool = Field(description="Served from the cache.")
    reward_version: str = Field(description="Changes whenever the reward's behaviour changes.")
    latency_ms: float = Field(description="Time spent on this item in this request, milliseconds.")
    shadow: ShadowResult | None = Field(
        None, description="The shadow reward's result for this item, when the request asked for one."
    )


class ScoreResponse(_Model):
    request_id: str
    results: list[ItemResult]
    metrics: dict[str, JSONValue] = Field(
        default_factory=dict,
        description="Per-request figures: counts, cache hits, invalid reasons, latency, per-reward means.",
    )


class RewardInfo(_Model):
    name: str
    version: str
    description: str
    cacheable: bool = Field(description="Whether results are cached (deterministic rewards only).")
    reads: list[str] = Field(description="Item fields the reward reads (and that make up its cache key).")
    config_schema: dict[str, JSONValue] = Field(description="JSON schema of `config`.")
    unavailable: str | None = Field(
        None,
        description="Why the reward cannot score with its default backend here (e.g. the setting of a "
        "model it needs), or null: it can.",
    )


class RewardsResponse(_Model):
    rewards: list[RewardInfo]


class RewardCheckRequest(_Model):
    """A reward spec to check without scoring anything."""

    model_config = ConfigDict(extra="forbid")

    reward: str | RewardSpec = Field(description="The reward, as in `POST /v1/score`.")


class UnavailablePart(_Model):
    where: str = Field(description="Where the spec names it: `reward`, `reward.config.components.0.reward`…")
    reward: str = Field(description="The reward's name.")
    message: str = Field(description="Why it cannot score here, naming the setting that would fix it.")


class RewardCheckResponse(_Model):
    """What the service would do with this spec: the answers `POST /v1/score` would act on."""

    name: str
    version: str = Field(description="The `reward_version` results would carry (includes the parts').")
    cacheable: bool = Field(description="Whether results for this config are cached.")
    reads: list[str] = Field(description="Item fields it reads, its parts included.")
    group_aware: bool = Field(description="Items need a `group` and whole groups (a group reward in it).")
    timeout_s: float | None = Field(
        description="The per-item deadline, seconds, scoring applies when the request sets no "
        "`options.timeout_s`: the reward's own default (a model call's), else `REWARDHUB_ITEM_TIMEOUT_S`; "
        "at most `REWARDHUB_MAX_ITEM_TIMEOUT_S`."
    )
    ok: bool = Field(description="True when it and every part can score here (`unavailable` is empty).")
    unavailable: list[UnavailablePart] = Field(
        default_factory=list, description="It or parts of it that cannot score on this server, and why."
    )


class CanaryItem(_Model):
    """A question the canaries answer, as a training item would carry it."""

    model_config = ConfigDict(extra="forbid")

    prompt: str | None = Field(None, description="The question (judges read it; echoed as one canary).")
    reference: str | dict[str, JSONValue] | list[JSONValue] | None = Field(
        None, description="Its gold answer, as in a score request."
    )
    response: str | None = Field(
        None,
        description="A real response to it: its first sentence, cut off there, is the truncated-opener "
        "canary (Master-RM's negatives).",
    )


class CanaryRequest(_Model):
    """Score content-free "master key" responses with a reward, to see whether they pass."""

    model_config = ConfigDict(extra="forbid")

    reward: str | RewardSpec = Field(description="The reward to probe, as in `POST /v1/score`.")
    items: list[CanaryItem] = Field(
        default_factory=list,
        max_length=64,
        description="Questions with references the canaries answer; none: four built-in arithmetic ones.",
    )
    threshold: float = Field(
        0.5,
        allow_inf_nan=False,
        description="A canary passes (a false positive) when its `correct` component is 1, or, without one, "
        "when its score is at least this.",
    )
    max_false_positive_rate: float = Field(
        0.01, ge=0.0, le=1.0, description="`ok` is false above this share of scored canaries passing."
    )


class CanaryResponse(_Model):
    reward: str
    reward_version: str
    probes: int = Field(description="Canary responses scored: each canary against each item.")
    scored: int = Field(description="Probes the reward could score (valid).")
    invalid: int = Field(description="Probes it could not score (they count neither way).")
    false_positives: int = Field(description="Scored probes that passed.")
    false_positive_rate: float | None = Field(description="false_positives / scored; null when none scored.")
    ok: bool = Field(description="false_positive_rate is at most max_false_positive_rate (and some scored).")
    by_canary: dict[str, dict[str, JSONValue]] = Field(
        description="Per canary: probes, scored, false_positives, false_positive_rate."
    )
    examples: list[dict[str, JSONValue]] = Field(
        description="Up to 10 false positives: canary, item (index), response, score."
    )


class HealthResponse(_Model):
    status: Literal["ok"]
    version: str
    uptime_s: float
    cache: str = Field(description="`redis`, `memory` or `off`.")
    cache_up: bool
    sandbox: str | None = Field(
        None,
        description="Code isolation: `bubblewrap`, `rlimits_only` (unisolated, allowed by setting) or `none` "
        "(code items are refused).",
    )


JobState = Literal["queued", "running", "succeeded", "failed", "cancelled"]


class JobStatus(_Model):
    job_id: str
    status: JobState = Field(
        description="`queued`, `running`, then `succeeded`, `failed` or `cancelled` (DELETE /v1/jobs/{job_id})."
    )
    created_at: float = Field(description="Unix time of submission.")
    started_at: float | None = None
    finished_at: float | None = Field(None, description="Unix time it succeeded, failed or was cancelled.")
    items: int
    result: ScoreResponse | None = Field(None, description="The scoring answer, once the job succeeded.")
    error: dict[str, JSONValue] | None = Field(
        None, description="`{type, message, param}` when the job failed."
    )


class JobSummary(_Model):
    """A job as ``GET /v1/jobs`` lists it: its status without its result (GET /v1/jobs/{job_id} has it)."""

    job_id: str
    status: JobState
    created_at: float
    started_at: float | None = None
    finished_at: float | None = None
    items: int
    error: dict[str, JSONValue] | None = None


class JobList(_Model):
    data: list[JobSummary] = Field(description="The caller's jobs, newest first.")
    has_more: bool = Field(description="More jobs matched than `limit`.")


class ReadyResponse(_Model):
    ready: bool
    checks: dict[str, dict[str, JSONValue]]
