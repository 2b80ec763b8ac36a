"""A circuit breaker for a remote backend.

When a judge server is down, every item would otherwise spend its whole deadline on connection
attempts and retries, and a trainer's step would stall for minutes on a dependency that is known to be
broken. The breaker counts consecutive failures of *calls* (after their retries):

* **closed** (normal): calls go through; ``failure_threshold`` consecutive failures open it;
* **open**: calls fail at once with :class:`~rewardhub.models.errors.CircuitOpen` (the item becomes
  ``backend_error``) for ``cooldown_s`` seconds;
* **half-open**: after the cool-down, exactly one call is let through as a probe. Success closes the
  breaker; failure opens it for another cool-down. Other calls keep failing fast while the probe runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from enum import StrEnum

from rewardhub.models.errors import CircuitOpen

__all__ = ["BreakerState", "CircuitBreaker"]


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitBreaker:
    def __init__(
        self,
        name: str,
        failure_threshold: int = 5,
        cooldown_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        if failure_threshold < 1:
            raise ValueError("failure_threshold must be at least 1")
        self.name = name
        self.failure_threshold = failure_threshold
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._state = BreakerState.CLOSED
        self._failures = 0
        self._opened_at = 0.0
        self._probing = False
        self.opened_count = 0
        self.last_failure: str | None = None

    @property
    def state(self) -> BreakerState:
        if self._state is BreakerState.OPEN and self._clock() - self._opened_at >= self.cooldown_s:
            return BreakerState.HALF_OPEN
        return self._state

    def before_call(self) -> bool:
        """Admit a call or raise :class:`CircuitOpen`; a half-open breaker admits one probe. Returns
        whether this call is that probe (its caller passes it back to :meth:`on_abandoned`)."""
        state = self.state
        if state is BreakerState.CLOSED:
            return False
        if state is BreakerState.HALF_OPEN and not self._probing:
            self._probing = True
            self._state = BreakerState.HALF_OPEN
            return True
        left = max(0.0, self.cooldown_s - (self._clock() - self._opened_at))
        # the failure that opened it: what is wrong (nothing listening at the URL, a 503...) and where;
        # without it every item after the first few said only "failed 5 times in a row"
        last = self.last_failure.removeprefix(f"backend {self.name!r}: ") if self.last_failure else None
        raise CircuitOpen(
            f"backend {self.name!r} failed "
            + (
                f"{self.failure_threshold} times in a row; "
                if self.failure_threshold > 1
                else "its last call; "
            )
            + (
                f"calls fail fast for {left:.1f}s more (then one probe is tried)"
                if left > 0
                else "a probe call is testing it now; calls fail fast until it answers"
            )
            + (f"; last failure: {last}" if last else "")
        )

    def on_success(self) -> None:
        self._state = BreakerState.CLOSED
        self._failures = 0
        self._probing = False

    def on_failure(self, reason: str | None = None, probe: bool = False) -> None:
        """One failed call; ``reason``, its error message, is quoted by the calls an open breaker fails.
        ``probe``: whether the call was the half-open probe (:meth:`before_call`'s answer). A call admitted
        while the breaker was closed that fails while the probe is in flight counts as a failure but
        leaves the probe slot alone: taken for the probe's failure, it freed the slot and restarted the
        cool-down, after which a second probe went out beside the first."""
        self._failures += 1
        if reason is not None:
            self.last_failure = reason
        if self._probing and not probe:
            return
        if self._probing or self._failures >= self.failure_threshold:
            if self._state is not BreakerState.OPEN or self._probing:
                self.opened_count += 1
            self._state = BreakerState.OPEN
            self._opened_at = self._clock()
            self._probing = False

    def on_abandoned(self, probe: bool) -> None:
        """A call ended without a verdict (the caller gave up, or it never reached the server): count
        nothing, and if it was the probe, free the probe slot. Another call's abandonment must not free
        it, or a second probe goes out while the first is still running."""
        if probe and self._probing:
            self._probing = False
            self._state = BreakerState.OPEN  # the cool-down has passed, so the next call probes again

    def describe(self) -> dict[str, object]:
        return {
            "state": self.state.value,
            "consecutive_failures": self._failures,
            "opened": self.opened_count,
        }
