"""Backend failures, as rewards see them.

A backend never decides an item's fate itself: it raises one of these and the reward turns it into an
invalid item (``backend_error`` or ``timeout``), never a 5xx and never a silent 0::

    BackendError               a backend failed (HTTP 5xx after retries, garbage, a crashed forward)
    ├── BackendTimeout         it did not answer within the item's deadline or its own timeout_s
    ├── CircuitOpen            the backend failed repeatedly; items fail fast until a probe succeeds
    ├── BackendUnavailable     no such backend, or it is not configured / not loaded (names the setting)
    │   └── MissingExtra       an optional dependency is not installed (names the pip extra)
    ├── BackendRejected        a server refused this input (HTTP 400/413/422): item-level, server healthy
    └── InputTooLong           the formatted input is longer than the model's context (item-level)

A full batcher queue is not a backend failure but back-pressure on the whole request:
:class:`rewardhub.errors.Overloaded` (429 with Retry-After).
"""

from __future__ import annotations

__all__ = [
    "BackendError",
    "BackendRejected",
    "BackendTimeout",
    "BackendUnavailable",
    "CircuitOpen",
    "InputTooLong",
    "MissingExtra",
]


class BackendError(Exception):
    """A model backend failed for this call."""

    @classmethod
    def of(cls, exc: BaseException, limit: int = 300) -> BackendError:
        """``exc`` itself when it is a backend error, else one that names it (a bug or a library's
        exception inside a forward pass): what the items of a failed call are given."""
        return exc if isinstance(exc, BackendError) else cls(f"{type(exc).__name__}: {exc}"[:limit])


class BackendTimeout(BackendError):
    """The backend did not answer in time: before the item's deadline, or (a remote backend, on its last
    attempt) within its own per-attempt timeout. Both are reason ``timeout``; the message says which."""


class CircuitOpen(BackendError):
    """The backend's circuit breaker is open: the call was not attempted."""


class BackendUnavailable(BackendError):
    """The named backend does not exist, is not configured, or cannot do what was asked."""


class MissingExtra(BackendUnavailable):
    """An optional dependency is missing; the message carries the install command."""

    def __init__(self, package: str, extra: str):
        super().__init__(f"{package} is not installed; install it with: pip install 'rewardhub[{extra}]'")
        self.package = package
        self.extra = extra

    def __reduce__(self) -> tuple[type[MissingExtra], tuple[str, str]]:  # crosses the model-process pipe
        return (MissingExtra, (self.package, self.extra))


class BackendRejected(BackendError):
    """A server answered that this input is invalid (HTTP 400, 413, 422).

    The server is up and answering, so the circuit breaker counts it as a success: a GRPO group of
    over-long rollouts must not open the breaker and fail every other item for its cool-down."""


class InputTooLong(BackendError):
    """The formatted input exceeds the model's context (``max_length``): an item problem, not a backend one."""
