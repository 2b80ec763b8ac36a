"""What every model reward (``judge``, ``prm``, ``orm``, ``similarity``) shares.

* The backend is chosen by *name* in the config (``backend: "judge"``), looked up in the runtime's
  :class:`~rewardhub.models.hub.ModelHub`. An unconfigured name is not a 422: the reward stays listed
  and its items come back invalid ``unsupported`` with a message naming the setting to set.
* The result depends on the model behind the name, which the config does not say, so the reward's
  version (and with it the cache key and ``reward_version``) carries a hash of the backend's identity
  (kind and model): pointing ``judge`` at another model never serves the old model's cached scores.
* Backend failures map onto reasons the same way everywhere (:func:`failure`): a timeout is ``timeout``,
  an input longer than the model's context is ``unsupported``, anything else is ``backend_error``.
* The per-item deadline defaults to 60 s, not the service's 5 s for rule verifiers: a model call takes
  longer, and a local model loads on its first use (MiniLM: 5-6 s on a 2-core machine, which made the
  first ``similarity`` request after a start a ``timeout``).
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Sequence
from typing import Any, ClassVar

from rewardhub.models.base import Capability, ModelBackend
from rewardhub.models.errors import BackendError, BackendTimeout, BackendUnavailable, InputTooLong
from rewardhub.protocol import Reason
from rewardhub.rewards.base import ConfigT, Outcome, ScoreContext
from rewardhub.rewards.composed import ComposedReward

__all__ = ["ModelReward", "cut_off", "deadline_of", "failure", "finite"]


def deadline_of(ctx: ScoreContext) -> float:
    """The absolute ``time.monotonic()`` deadline of this request's items."""
    return time.monotonic() + ctx.deadline_s


def failure(exc: BaseException, **details: Any) -> Outcome:
    """An invalid outcome for a backend failure (never a 0: the model is not at fault).

    An unavailable backend (none configured, ``torch`` not installed, a model that failed to load) is
    ``unsupported`` and *transient*: this server cannot score the item now, which says nothing about the
    item. A composite that zeroes or skips the part must not cache its result (a composite over the
    default MiniLM on a server without torch cached a 0.0, still served once torch was installed)."""
    msg = str(exc)[:500] or type(exc).__name__
    if isinstance(exc, BackendTimeout | TimeoutError):
        return Outcome.invalid(Reason.TIMEOUT, msg or "the item's deadline passed", **details)
    if isinstance(exc, BackendUnavailable):
        return Outcome.invalid(Reason.UNSUPPORTED, msg, transient=True, **details)
    if isinstance(exc, InputTooLong):
        return Outcome.invalid(Reason.UNSUPPORTED, msg, **details)
    if isinstance(exc, BackendError):
        return Outcome.invalid(Reason.BACKEND_ERROR, msg, **details)
    return Outcome.invalid(Reason.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}"[:300], **details)


def cut_off(what: str, max_tokens: int, **details: Any) -> Outcome:
    """A generation stopped at ``max_tokens`` (``finish_reason: "length"``) has no answer to read: its
    last verdict or number may be a draft, or "Score: 1" the start of "Score: 10"."""
    return Outcome.invalid(
        Reason.PARSE_ERROR, f"{what} was cut off at max_tokens={max_tokens}; raise max_tokens", **details
    )


def finite(results: Sequence[list[float] | BackendError]) -> list[list[float] | BackendError]:
    """Model outputs with a NaN or an infinity (an fp16/bf16 overflow, a broken checkpoint) as item
    errors. Read on, they became valid scores: a NaN step probability passes every ``first_error``
    threshold check (a perfect 1.0), ``min`` depends on where the NaN sits, and an infinite logit is a
    sigmoid's 1.0 or 0.0."""
    return [
        r
        if isinstance(r, BackendError) or all(math.isfinite(x) for x in r)
        else BackendError("the model produced non-finite outputs (NaN or infinity)")
        for r in results
    ]


class ModelReward(ComposedReward[ConfigT]):
    """Base of rewards backed by a named model backend (see the module docstring)."""

    default_backend: ClassVar[str]
    capability: ClassVar[Capability]  # what it asks of its backend
    # A model call (and a local model's first load) takes seconds, not a rule verifier's milliseconds.
    default_timeout_s: ClassVar[float | None] = 60.0

    def backend_name(self, config: ConfigT) -> str:
        name = getattr(config, "backend", None)
        return str(name) if name else self.default_backend

    def backend(self, config: ConfigT) -> ModelBackend:
        """The configured backend, able to do what this reward asks of it (:attr:`capability`). Raises
        :class:`BackendUnavailable` naming the setting to set, or what the backend can do instead (an
        ORM named on an embedding backend), so the catalog, ``/v1/rewards/check`` and scoring agree."""
        return self._capable_backend(self.backend_name(config))

    def _capable_backend(self, name: str) -> ModelBackend:
        hub = self.runtime.models
        if hub is None:
            raise BackendUnavailable("model backends are not available in this runtime")
        backend = hub.get(name)
        backend.require(self.capability)
        return backend

    def _why_not(self, name: str) -> str | None:
        try:
            self._capable_backend(name)
        except BackendUnavailable as exc:
            return str(exc)
        return None

    def unavailable(self) -> str | None:
        return self._why_not(self.default_backend)

    def unavailable_for(self, config: ConfigT) -> str | None:
        return self._why_not(self.backend_name(config))

    def deadline_bounds_wall_time(self, config: ConfigT) -> bool:
        return True  # (every model call, and what runs around it, is bounded by deadline_of)

    def is_cacheable(self, config: ConfigT) -> bool:
        if not super().is_cacheable(config):
            return False
        try:
            return self.backend(config).identity_settled
        except BackendUnavailable:  # nothing is scored, so nothing is cached
            return True

    def version_for(self, config: ConfigT) -> str:
        base = super().version_for(config)
        try:
            backend = self.backend(config)
        except BackendUnavailable:
            return base
        return f"{base}+{identity_digest(backend)}"


def identity_digest(backend: ModelBackend) -> str:
    """A short hash of what a backend's results depend on (:meth:`ModelBackend.identity`), for a reward's
    version and with it the cache key."""
    return hashlib.sha256(backend.identity().encode()).hexdigest()[:10]
