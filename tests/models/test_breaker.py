"""CircuitBreaker state machine with a controllable clock."""

from __future__ import annotations

import pytest

from rewardhub.models.breaker import BreakerState, CircuitBreaker
from rewardhub.models.errors import CircuitOpen


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_opens_after_consecutive_failures_then_probes_once() -> None:
    clock = Clock()
    b = CircuitBreaker("j", failure_threshold=3, cooldown_s=10, clock=clock)
    for _ in range(2):
        b.before_call()
        b.on_failure()
    b.before_call()
    b.on_success()  # a success resets the count
    for _ in range(3):
        b.before_call()
        b.on_failure()
    assert b.state is BreakerState.OPEN and b.opened_count == 1
    with pytest.raises(CircuitOpen, match="fail fast"):
        b.before_call()
    clock.t = 10.0
    assert b.state is BreakerState.HALF_OPEN
    probe = b.before_call()  # the probe
    with pytest.raises(CircuitOpen, match="a probe call is testing it now"):
        b.before_call()  # only one probe at a time (it said "fail fast for 0.0s more")
    b.on_failure(probe=probe)  # probe failed: open for another cool-down
    assert b.state is BreakerState.OPEN and b.opened_count == 2
    clock.t = 20.0
    b.before_call()
    b.on_success()
    assert b.state is BreakerState.CLOSED
    b.before_call()


def test_abandoned_probe_frees_the_slot() -> None:
    clock = Clock()
    b = CircuitBreaker("j", failure_threshold=1, cooldown_s=1, clock=clock)
    b.before_call()
    b.on_failure()
    clock.t = 1.0
    b.before_call()
    b.on_abandoned(probe=True)
    b.before_call()  # another probe is allowed
    b.on_success()
    assert b.state is BreakerState.CLOSED


def test_only_the_probe_frees_the_probe_slot() -> None:
    """A call admitted while closed and abandoned later (its caller timed out) must not let a second
    probe out while the first is still running."""
    clock = Clock()
    b = CircuitBreaker("j", failure_threshold=1, cooldown_s=1, clock=clock)
    early = b.before_call()  # admitted while closed, still in flight
    b.before_call()
    b.on_failure()  # another call fails: open
    clock.t = 1.0
    assert b.before_call() is True and early is False  # the probe
    b.on_abandoned(early)
    with pytest.raises(CircuitOpen):
        b.before_call()


def test_a_late_failure_of_a_call_admitted_while_closed_does_not_free_the_probe_slot() -> None:
    """A call admitted while the breaker was closed failed while the probe was in flight: it was taken for
    the probe's failure (the slot freed, a new cool-down), so after that cool-down a second probe went out
    while the first was still running. It counts as a failure; the probe in flight decides."""
    clock = Clock()
    b = CircuitBreaker("j", failure_threshold=1, cooldown_s=1, clock=clock)
    early = b.before_call()  # admitted while closed, still in flight
    b.before_call()
    b.on_failure("refused")  # another call fails: open
    clock.t = 1.0
    probe = b.before_call()
    assert probe is True and early is False
    b.on_failure("timed out", probe=early)  # the early call ends now, failed
    clock.t = 2.5
    with pytest.raises(CircuitOpen, match="a probe call is testing it now"):
        b.before_call()  # the probe is still running: no second one
    b.on_success()  # the probe answers
    assert b.state is BreakerState.CLOSED
