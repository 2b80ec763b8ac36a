"""rewardhub_client: typed HTTP client for a rewardhub service (depends only on httpx and pydantic).

* :class:`RewardClient` / :class:`AsyncRewardClient` — score batches, list rewards, submit, list
  and cancel jobs;
* :mod:`rewardhub_client.trl` — a reward function for TRL's ``GRPOTrainer(reward_funcs=...)``;
* :mod:`rewardhub_client.verl` — ``compute_score`` for verl's ``custom_reward_function``;
* :mod:`rewardhub_client.slime` — ``reward_func`` for slime's ``--custom-rm-path``.
"""

from __future__ import annotations

from rewardhub_client._core import RetryPolicy
from rewardhub_client.client import AsyncRewardClient, RewardClient
from rewardhub_client.errors import (
    APIError,
    Conflict,
    Forbidden,
    InvalidRequest,
    LimitExceeded,
    NotConfigured,
    NotFound,
    Overloaded,
    PayloadTooLarge,
    ProtocolError,
    RequestTimeout,
    RewardHubClientError,
    RewardUnavailable,
    ServerError,
    ServiceUnavailable,
    TransportError,
    Unauthorized,
    UnknownReward,
)
from rewardhub_client.types import (
    INVALID_REASONS,
    CanaryReport,
    ItemResult,
    JobList,
    JobState,
    JobStatus,
    JobSummary,
    RewardCheck,
    RewardInfo,
    RewardSpec,
    ScoreItem,
    ScoreOptions,
    ScoreRequest,
    ScoreResponse,
    ShadowResult,
    ShadowSpec,
    UnavailablePart,
)

__version__ = "0.1.0"

__all__ = [
    "INVALID_REASONS",
    "APIError",
    "AsyncRewardClient",
    "CanaryReport",
    "Conflict",
    "Forbidden",
    "InvalidRequest",
    "ItemResult",
    "JobList",
    "JobState",
    "JobStatus",
    "JobSummary",
    "LimitExceeded",
    "NotConfigured",
    "NotFound",
    "Overloaded",
    "PayloadTooLarge",
    "ProtocolError",
    "RequestTimeout",
    "RetryPolicy",
    "RewardCheck",
    "RewardClient",
    "RewardHubClientError",
    "RewardUnavailable",
    "RewardInfo",
    "RewardSpec",
    "ScoreItem",
    "ScoreOptions",
    "ScoreRequest",
    "ScoreResponse",
    "ShadowResult",
    "ShadowSpec",
    "ServerError",
    "ServiceUnavailable",
    "TransportError",
    "Unauthorized",
    "UnavailablePart",
    "UnknownReward",
    "__version__",
]
