"""Backend failures, as rewards see them.

A backend never decides an item's fate itself: it raises one of these and the reward turns it into an
invalid item (``backend_error`` or ``timeout``), never a 5xx and never a silent 0::

    BackendError               a backend failed (HTTP 5xx after retries, garbage, a crashed forward)
    ├── BackendTimeout         it did not answer within the item's deadline or its own timeout_s
    ├── CircuitOpen            the backend failed repeatedly; items fail fast until a probe succeeds
    ├── BackendUnavailable     no such backend, or it is not configured / not loaded (names the setting)
    │   └── MissingExtra       an optional dependency is not installed (names the pip extra)
    ├── ForwardCrashed         a local forward pass crashed as a whole (the model process died, out of
    │                          memory): one item or the batch's size can cause it, so it is retried split
    ├── BackendRejected        a server refused this input (HTTP 400/422): item-level, server healthy
    └── InputTooLong           the formatted input is longer than the model's context, or the request is
                               over a size limit (HTTP 413): item-level, a batch is sent again in parts

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
    "ForwardCrashed",
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
        # The README's install: bootstrap (constraints.txt for torch, and the embedded MiniLM with
        # `models`) into the clone's .venv; the service's extra comes with any other.
        extras = extra if extra == "service" else f"service,{extra}"
        super().__init__(
            f"{package} is not installed; install it with scripts/bootstrap {extras} in the clone "
            f"(or, in its venv, pip install -c constraints.txt -e '.[{extras}]')"
        )
        self.package = package
        self.extra = extra

    def __reduce__(self) -> tuple[type[MissingExtra], tuple[str, str]]:  # crosses the model-process pipe
        return (MissingExtra, (self.package, self.extra))


class ForwardCrashed(BackendError):
    """A local forward pass failed as a whole in a way that one item or the batch's size can cause: the
    model process died in it (a segfault on one input, the out-of-memory killer, a CUDA error that left
    its device unusable) or it ran out of memory.

    The batcher does not fail the whole batch with it: items that can be scored are, and the one that
    cannot fails alone (see :meth:`rewardhub.models.batcher.MicroBatcher`). ``died`` says which: a dead
    process reloads its model before the next pass, so the batch is retried one item at a time (one more
    reload per item that kills it); out of memory is retried in halves (no reload; smaller passes fit)."""

    def __init__(self, message: str, died: bool):
        super().__init__(message)
        self.died = died

    def __reduce__(self) -> tuple[type[ForwardCrashed], tuple[str, bool]]:  # crosses the model-process pipe
        return (ForwardCrashed, (str(self), self.died))

    @classmethod
    def out_of_memory(cls, exc: BaseException) -> ForwardCrashed | None:
        """``exc`` as a crash when it is an allocation failure, else None: torch's ``OutOfMemoryError``
        (CUDA), the RuntimeError of its CPU allocator ("DefaultCPUAllocator: can't allocate memory"; MPS
        says "out of memory"), or Python's ``MemoryError``. By name and text, so no torch import."""
        text = str(exc)
        if (
            isinstance(exc, MemoryError)
            or any(t.__name__ == "OutOfMemoryError" for t in type(exc).__mro__)
            or (
                isinstance(exc, RuntimeError) and ("can't allocate memory" in text or "out of memory" in text)
            )
        ):
            return cls(f"out of memory in the forward pass: {type(exc).__name__}: {exc}"[:500], died=False)
        return None


class BackendRejected(BackendError):
    """A server answered that this input is invalid (HTTP 400, 422).

    The server is up and answering, so the circuit breaker counts it as a success: a GRPO group of
    over-long rollouts must not open the breaker and fail every other item for its cool-down."""


class InputTooLong(BackendError):
    """The formatted input exceeds the model's context (``max_length``): an item problem, not a backend one."""
