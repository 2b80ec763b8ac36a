"""The service's exception tree and its single mapping to HTTP.

Only request-level faults raise. A failure on one item is data (``valid: false`` with a reason), so
nothing below is ever raised for a single bad item::

    RewardHubError                 500 internal_error   (anything unexpected)
    ├── InvalidRequest             422 invalid_request  (a field is malformed; `param` names it)
    │   └── LimitExceeded          422 limit_exceeded   (too many items / a field too long; names the setting)
    ├── PayloadTooLarge            413 payload_too_large
    ├── UnknownReward              404 unknown_reward   (lists the known names)
    ├── NotFound                   404 not_found
    ├── Unauthorized               401 unauthorized
    ├── Forbidden                  403 forbidden
    ├── Conflict                   409 conflict         (an Idempotency-Key reused with another body;
    │                                                    cancelling a job that has already finished)
    ├── Overloaded                 429 overloaded       (carries Retry-After)
    └── ServiceUnavailable         503 unavailable

The JSON body is always ``{"error": {"message", "type", "param", "code"}}`` (the OpenAI/vLLM envelope),
which the client package maps back onto its own exception classes by ``type``.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from rewardhub.responses import JSONBytesResponse

__all__ = [
    "Conflict",
    "ErrorBody",
    "ErrorResponse",
    "Forbidden",
    "InvalidRequest",
    "LimitExceeded",
    "NotConfigured",
    "NotFound",
    "Overloaded",
    "PayloadTooLarge",
    "RewardHubError",
    "ServiceUnavailable",
    "error_responses",
    "queue_retry_after",
    "Unauthorized",
    "UnknownReward",
    "install_error_handlers",
]

log = structlog.get_logger("rewardhub.errors")


class RewardHubError(Exception):
    """Root of the tree; an unexpected error is reported as this (500)."""

    status_code: ClassVar[int] = 500
    error_type: ClassVar[str] = "internal_error"

    def __init__(self, message: str, *, param: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.message = message
        self.param = param
        self.headers = headers or {}


class InvalidRequest(RewardHubError):
    """The request is well-formed JSON but a field is wrong."""

    status_code = 422
    error_type = "invalid_request"


class LimitExceeded(InvalidRequest):
    """A configured size limit was exceeded; the message names the setting that raises it."""

    error_type = "limit_exceeded"


class PayloadTooLarge(RewardHubError):
    """The request body is larger than ``REWARDHUB_MAX_REQUEST_BYTES``."""

    status_code = 413
    error_type = "payload_too_large"


class UnknownReward(RewardHubError):
    """A reward name that is not in the registry."""

    status_code = 404
    error_type = "unknown_reward"


class NotFound(RewardHubError):
    """A resource (a job, say) that does not exist."""

    status_code = 404
    error_type = "not_found"


class Unauthorized(RewardHubError):
    """No API key was presented where one is required."""

    status_code = 401
    error_type = "unauthorized"


class Forbidden(RewardHubError):
    """An API key was presented but is not accepted."""

    status_code = 403
    error_type = "forbidden"


class Conflict(RewardHubError):
    """The request conflicts with earlier state (an Idempotency-Key reused with a different body, a cancel
    of a job that has already succeeded or failed)."""

    status_code = 409
    error_type = "conflict"


class Overloaded(RewardHubError):
    """Queues are full; retry after ``retry_after_s`` seconds."""

    status_code = 429
    error_type = "overloaded"

    def __init__(self, message: str, *, retry_after_s: float = 1.0, param: str | None = None):
        # whole seconds, rounded up: a client told less than the wait comes back to another 429
        super().__init__(message, param=param, headers={"Retry-After": str(max(1, math.ceil(retry_after_s)))})
        self.retry_after_s = retry_after_s


def queue_retry_after(estimate_s: float) -> float:
    """The Retry-After of a full queue (the model batchers, the CPU pool, the sandbox) from its estimate of
    when the caller's work would fit: at least a second, at most a minute. An estimate of the time to
    drain a whole queue grew with the queue (125-500 s for the sandbox's default), past the 120 s that
    ``rewardhub_client`` waits before it gives up, and past when there was room again."""
    return min(60.0, max(1.0, estimate_s))


class ServiceUnavailable(RewardHubError):
    """The service is starting, stopping, or a required dependency is missing."""

    status_code = 503
    error_type = "unavailable"


class NotConfigured(RewardHubError):
    """The feature cannot work as the service is deployed (not a transient state: no retry helps)."""

    status_code = 501
    error_type = "not_configured"


class ErrorBody(BaseModel):
    message: str = Field(description="What went wrong, for a person.")
    type: str = Field(description="Machine-readable error class, e.g. `unknown_reward`.")
    param: str | None = Field(None, description="The request field at fault, if any (dotted path).")
    code: int = Field(description="The HTTP status code.")


class ErrorResponse(BaseModel):
    """The body of every non-2xx answer."""

    error: ErrorBody


def error_payload(status: int, error_type: str, message: str, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "param": param, "code": status}}


def error_responses(*errors: tuple[type[RewardHubError], str]) -> dict[int | str, dict[str, Any]]:
    """A route's documented error answers (its ``responses``): each error the route can answer, with when,
    under the status this module maps the error to; errors of one status share its entry."""
    documented: dict[int, list[str]] = {}
    for error, when in errors:
        documented.setdefault(error.status_code, []).append(when)
    return {
        status: {"model": ErrorResponse, "description": " ".join(whens)}
        for status, whens in sorted(documented.items())
    }


# pydantic puts a union member's name in an error's loc ("reward.str", "reward.RewardSpec.configs"):
# the member a value failed to be, not a field a user wrote
_UNION_MEMBERS = frozenset({"str", "int", "float", "bool", "RewardSpec"})


def _loc_to_param(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if p not in ("body",) and p not in _UNION_MEMBERS]
    return ".".join(parts)


def _most_telling(errors: list[Any]) -> Any:
    """The error to name first: one that is not a bare type mismatch, where there is one. A union field
    (``reward``: a name or a spec) fails once per member, the string member first, so for an object
    with a misspelt key the first error was "should be a valid string" and the key went unnamed.
    Among type mismatches, one inside a member (``reward.RewardSpec.config`` for ``"config": null``)
    before one saying the value is not a member at all (``reward.str``): the object was a spec."""
    telling = next((e for e in errors if not str(e.get("type", "")).endswith("_type")), None)
    if telling is not None:
        return telling
    return next(
        (e for e in errors if any(p in _UNION_MEMBERS for p in tuple(e.get("loc", ()))[:-1])), errors[0]
    )


def install_error_handlers(app: FastAPI) -> None:
    """Register the one mapping from exceptions to HTTP answers (MRO lookup covers subclasses)."""

    @app.exception_handler(RewardHubError)
    async def _rewardhub_error(request: Request, exc: RewardHubError) -> JSONBytesResponse:
        if exc.status_code >= 500:
            log.error("request_failed", path=request.url.path, error=exc.message)
        return JSONBytesResponse(
            error_payload(exc.status_code, exc.error_type, exc.message, exc.param),
            status_code=exc.status_code,
            headers=exc.headers,
        )

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> JSONBytesResponse:
        errors = list(exc.errors())
        first = _most_telling(errors) if errors else {"loc": (), "msg": "invalid request"}
        loc = tuple(first.get("loc", ()))
        if first.get("type") == "json_invalid" and first.get("input") not in ("", b""):
            # FastAPI's loc is ("body", <character offset>): not a field. pydantic's own JSON parser
            # (/v1/score) has no offset in loc (just "body") but says where in its message.
            ctx = first.get("ctx") or {}
            reason = ctx.get("error") if isinstance(ctx, dict) else None
            msg = f"Invalid JSON: {reason or first.get('msg')}"
            if loc and isinstance(loc[-1], int):
                msg += f" (at character {loc[-1]})"
            return JSONBytesResponse(error_payload(422, "invalid_request", msg, None), status_code=422)
        if first.get("type") in ("missing", "json_invalid") and loc == ("body",):
            msg = "the request needs a JSON body"
            return JSONBytesResponse(error_payload(422, "invalid_request", msg, None), status_code=422)
        param = _loc_to_param(loc)
        msg = f"{param}: {first.get('msg')}" if param else str(first.get("msg"))
        if len(errors) > 1:
            msg += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
        return JSONBytesResponse(error_payload(422, "invalid_request", msg, param or None), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONBytesResponse:
        etype = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return JSONBytesResponse(
            error_payload(exc.status_code, etype, str(exc.detail)),
            status_code=exc.status_code,
            headers=getattr(exc, "headers", None),
        )

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONBytesResponse:
        # Starlette runs this handler outside every middleware: the request context has been left
        # (no X-Request-ID added, the id unbound from the log context), so both are done here.
        rid = request.scope.get("state", {}).get("request_id")
        log.exception("unhandled_error", path=request.url.path, request_id=rid)
        return JSONBytesResponse(
            error_payload(500, "internal_error", "internal server error"),
            status_code=500,
            headers={"x-request-id": rid} if rid else None,
        )
