"""The client's exception tree, mapped from the service's error envelope.

::

    RewardHubClientError        itself: a request the HTTP library refuses to send (an illegal header
    │                           value, an API key with a line break); not retried
    ├── RewardUnavailable       the service cannot run a reward spec or a part of it (its check said so)
    ├── TransportError          the service could not be reached (connect error, timeout, broken connection)
    │   └── RequestTimeout
    ├── ProtocolError           a 200 answer that does not fit the request (results missing or extra), or
    │                           is not the service's answer at all (a proxy's page)
    └── APIError                the service answered with an error body {"error": {message, type, param, code}}
        ├── InvalidRequest      422 invalid_request
        │   └── LimitExceeded   422 limit_exceeded (too many items / a field too long)
        ├── PayloadTooLarge     413
        ├── Unauthorized        401
        ├── Forbidden           403
        ├── NotFound            404 not_found
        │   └── UnknownReward   404 unknown_reward
        ├── Conflict            409 (an Idempotency-Key reused with a different body; cancelling a
        │                           job that has already succeeded or failed)
        ├── Overloaded          429 (carries retry_after_s)
        ├── ServiceUnavailable  503
        └── ServerError         other 5xx
            └── NotConfigured   501 not_configured (the deployment cannot do it: jobs under several
                                workers without Redis; not retried)
"""

from __future__ import annotations

import datetime
import email.utils
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from .types import ItemResult

__all__ = [
    "APIError",
    "Conflict",
    "Forbidden",
    "InvalidRequest",
    "LimitExceeded",
    "NotConfigured",
    "NotFound",
    "Overloaded",
    "PayloadTooLarge",
    "ProtocolError",
    "RequestTimeout",
    "RewardHubClientError",
    "RewardUnavailable",
    "ServerError",
    "ServiceUnavailable",
    "TransportError",
    "Unauthorized",
    "UnknownReward",
    "cannot_run",
    "error_from_response",
]


class RewardHubClientError(Exception):
    """Root of every exception the client raises.

    ``partial_results``: set when ``score`` sent a batch in several chunks and some of them failed (after
    their retries) while others were answered: one entry per item of the batch, in item order, the
    answered items' :class:`ItemResult` and ``None`` for the items of the failed chunks (listed in
    ``failed_indices``), so that a caller keeps the rewards it already paid for. ``None`` (and
    ``failed_indices`` empty) when nothing was answered or the error is not about a chunked batch.
    """

    partial_results: list[ItemResult | None] | None = None
    # A tuple at class level: a list here would be one list shared by every error that was not given its own.
    failed_indices: Sequence[int] = ()


class RewardUnavailable(RewardHubClientError):
    """``POST /v1/rewards/check`` answered ``ok: false``: every item scored with this spec would come back
    invalid (``unsupported``). ``check`` is the service's answer (a :class:`~rewardhub_client.RewardCheck`),
    whose ``unavailable`` names each part that cannot run, where the spec names it, and the setting to set.
    """

    def __init__(self, url: str, check: Any):
        self.url = url
        self.check = check
        super().__init__(cannot_run(url, check))

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled as its arguments (see APIError.__reduce__)
        return (type(self), (self.url, self.check))


def cannot_run(url: str, check: Any) -> str:
    """What a ``not ok`` check says, every part that cannot run in one message (so that one
    fix-and-retry is enough): ``the service at URL cannot run reward 'prm' (reward.config.components.1.
    reward): <why, naming the setting>; cannot run reward ...``."""
    parts = "; ".join(
        f"cannot run reward {p.reward!r}"
        + (f" ({p.where})" if p.where != "reward" else "")
        + f": {p.message}"
        for p in check.unavailable
    )
    return f"the service at {url} {parts}"


class TransportError(RewardHubClientError):
    """The request did not get an HTTP answer."""


class RequestTimeout(TransportError):
    """The request ran past the client's timeout."""


class ProtocolError(RewardHubClientError):
    """A successful answer that does not fit the request: one result per item, each with its item's id,
    is the contract, and a trainer that zipped a short or reordered list with its rollouts would give
    rewards to the wrong ones. Also a 200 whose body is not the service's answer (a proxy's own page)."""


class APIError(RewardHubClientError):
    """The service answered with an error status."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        error_type: str | None = None,
        param: str | None = None,
        retry_after_s: float | None = None,
        body: Any = None,
    ):
        super().__init__(f"{status_code} {error_type or 'error'}: {message}")
        self.message = message
        self.status_code = status_code
        self.error_type = error_type
        self.param = param
        self.retry_after_s = retry_after_s
        self.body = body

    def __reduce__(self) -> tuple[Any, ...]:
        # An exception is pickled as its args by default and rebuilt as cls(*args), which the keyword-only
        # status_code refused: raised in a worker process (verl's reward workers, a process pool), the
        # error broke the pool or the Ray task instead of reaching the trainer with its message.
        fields = {
            "status_code": self.status_code,
            "error_type": self.error_type,
            "param": self.param,
            "retry_after_s": self.retry_after_s,
            "body": self.body,
        }
        # and its other attributes (a chunked batch's partial_results and failed_indices) as its state:
        # rebuilt from its arguments alone, it reached the trainer without the rewards already computed
        return (_rebuild, (type(self), self.message, fields), dict(self.__dict__))


def _rebuild(cls: type[APIError], message: str, fields: dict[str, Any]) -> APIError:
    return cls(message, **fields)


class InvalidRequest(APIError):
    """422: a field is malformed (``param`` names it)."""


class LimitExceeded(InvalidRequest):
    """422: a size limit of the service (the message names the setting). ``score`` splits a chunk over the
    item limit until it fits: raised for a single group over it, or a field too long."""


class PayloadTooLarge(APIError):
    """413: the body is over the service's byte limit (``score`` splits a chunk until it fits: raised for a
    single item or group over it)."""


class Unauthorized(APIError):
    """401: an API key is required."""


class Forbidden(APIError):
    """403: the API key is not accepted."""


class NotFound(APIError):
    """404: no such resource (a job id, a path)."""


class UnknownReward(NotFound):
    """404: the reward name is not registered (the message lists the known ones)."""


class Conflict(APIError):
    """409: an Idempotency-Key was reused with a different request body, or a job that has already
    succeeded or failed was to be cancelled."""


class Overloaded(APIError):
    """429: the service's queues are full; retry after ``retry_after_s``."""


class ServiceUnavailable(APIError):
    """503: starting up, shutting down, or a dependency is missing."""


class ServerError(APIError):
    """Any other 5xx."""


class NotConfigured(ServerError):
    """501: the service cannot do this as it is deployed (jobs under ``--workers N`` without a Redis the
    workers share); the message names the setting. Not a passing state: never retried."""


_BY_TYPE: dict[str, type[APIError]] = {
    "invalid_request": InvalidRequest,
    "limit_exceeded": LimitExceeded,
    "payload_too_large": PayloadTooLarge,
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "not_found": NotFound,
    "unknown_reward": UnknownReward,
    "conflict": Conflict,
    "overloaded": Overloaded,
    "unavailable": ServiceUnavailable,
    "not_configured": NotConfigured,
}

_BY_STATUS: dict[int, type[APIError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    422: InvalidRequest,
    429: Overloaded,
    503: ServiceUnavailable,
}


def retry_after(response: httpx.Response) -> float | None:
    """Seconds from a ``Retry-After`` header, if any: delta-seconds or an HTTP-date (RFC 9110 §10.2.3; what
    proxies and gateways in front of the service send), a date in the past as 0."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return max(0.0, (when - datetime.datetime.now(datetime.UTC)).total_seconds())


def error_from_response(response: httpx.Response) -> APIError:
    """Map an error answer onto the exception tree, by the body's ``type`` first, then the status."""
    message, etype, param, body = response.reason_phrase or "error", None, None, None
    try:
        body = response.json()
        err = body.get("error") if isinstance(body, dict) else None
        if isinstance(err, dict):
            message = str(err.get("message", message))
            etype = err.get("type")
            param = err.get("param")
        else:
            # not the service's envelope (a gateway's, an auth proxy's): what it says, not the bare reason
            said = next(
                (body[k] for k in ("error", "detail", "message") if isinstance(body, dict) and body.get(k)),
                None,
            )
            message = said if isinstance(said, str) else response.text.strip()[:500] or message
    except ValueError:
        text = response.text.strip()
        if text:
            message = text[:500]
    cls = _BY_TYPE.get(etype or "") or _BY_STATUS.get(response.status_code)
    if cls is None:
        cls = ServerError if response.status_code >= 500 else APIError
    return cls(
        message,
        status_code=response.status_code,
        error_type=etype,
        param=param,
        retry_after_s=retry_after(response),
        body=body,
    )
