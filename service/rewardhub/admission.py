"""Admission control: bounded work in flight, and per-API-key concurrency quotas.

Past a bound the service answers 429 with ``Retry-After`` at once rather than queueing without limit:
a trainer's client backs off (rewardhub_client honours Retry-After) instead of piling up timeouts.
Two bounds apply to every scoring call (``/v1/score``, jobs, compat endpoints):

* ``REWARDHUB_MAX_INFLIGHT_ITEMS`` — items being scored at once, across all callers;
* ``REWARDHUB_PER_KEY_MAX_CONCURRENCY`` — requests in flight per API key (when keys are configured),
  so one experiment cannot take the whole service from the others;
* ``REWARDHUB_PER_KEY_RATE_LIMIT`` / ``REWARDHUB_PER_KEY_RATE_BURST`` — requests per second per API key,
  a token bucket; the 429's ``Retry-After`` is the time until the next token.

The worker pools behind the rewards have their own bounded queues (``REWARDHUB_CPU_QUEUE_MAX_ITEMS``).
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from rewardhub.errors import Overloaded
from rewardhub.metrics import Metrics
from rewardhub.security import Caller

__all__ = ["Admission"]


@dataclass(slots=True)
class _Bucket:
    tokens: float
    stamp: float


@dataclass(slots=True)
class _Waiter:
    n_items: int
    since: float
    priority_after_s: float
    for_room: bool = True  # False while it waits for its own key's turn (quota, rate): no priority then


class Admission:
    def __init__(
        self,
        max_items: int,
        per_key_concurrency: int,
        metrics: Metrics | None = None,
        *,
        rate_per_s: float = 0.0,
        burst: int = 20,
    ):
        self.max_items = max_items
        self.per_key_concurrency = per_key_concurrency
        self.rate_per_s = rate_per_s
        self.burst = burst
        self.items = 0
        self._per_key: dict[str, int] = {}
        self._buckets: dict[str, _Bucket] = {}
        self._waiters: dict[int, _Waiter] = {}  # background work waiting for room, by ticket
        self._tickets = itertools.count()
        if metrics is not None:
            metrics.watch(metrics.queue_depth.labels("inflight_items"), lambda: self.items)

    def check(self, caller: Caller, n_items: int, *, _since: float = math.inf) -> None:
        """Raise Overloaded if this call would exceed a bound (nothing is reserved)."""
        self._check_room(n_items, _since)
        self._check_key(caller)

    def _check_room(self, n_items: int, since: float = math.inf) -> None:
        """The bounds shared by all callers: items in flight, and the room a long-waiting job is owed."""
        if self.items and self.items + n_items > self.max_items:
            raise Overloaded(
                f"{self.items} items are being scored; {n_items} more would exceed the limit of "
                f"{self.max_items} (REWARDHUB_MAX_INFLIGHT_ITEMS)",
                retry_after_s=1.0,
            )
        now = time.monotonic()
        for w in self._waiters.values():
            # a job that has waited long enough goes first: work that would leave it no room waits
            # (older waiters only, so two waiting jobs never hold each other up)
            # (a job waiting for its own key's turn cannot start however much room is left: it is owed none)
            first = w.for_room and w.since < since and now - w.since >= w.priority_after_s
            if first and self.items + n_items + w.n_items > self.max_items:
                raise Overloaded(
                    f"a job of {w.n_items} items has waited {now - w.since:.0f} s for room; new work waits "
                    f"until it starts (REWARDHUB_MAX_INFLIGHT_ITEMS={self.max_items})",
                    retry_after_s=1.0,
                )

    def _check_key(self, caller: Caller) -> None:
        """The caller's own quota: requests in flight per API key."""
        if self.per_key_concurrency and not caller.anonymous:
            running = self._per_key.get(caller.key_id, 0)
            if running >= self.per_key_concurrency:
                raise Overloaded(
                    f"this API key has {running} requests in flight (limit "
                    f"{self.per_key_concurrency} per key, REWARDHUB_PER_KEY_MAX_CONCURRENCY)",
                    retry_after_s=1.0,
                )

    def _take_token(self, caller: Caller) -> None:
        """Token bucket per key: ``burst`` requests at once, refilled at ``rate_per_s``."""
        if not self.rate_per_s or caller.anonymous:
            return
        now = time.monotonic()
        b = self._buckets.get(caller.key_id)
        if b is None:
            b = self._buckets[caller.key_id] = _Bucket(float(self.burst), now)
        b.tokens = min(float(self.burst), b.tokens + (now - b.stamp) * self.rate_per_s)
        b.stamp = now
        if b.tokens < 1.0:
            wait = (1.0 - b.tokens) / self.rate_per_s
            raise Overloaded(
                f"this API key is over its rate limit of {self.rate_per_s:g} requests/s "
                f"(REWARDHUB_PER_KEY_RATE_LIMIT, burst REWARDHUB_PER_KEY_RATE_BURST={self.burst})",
                retry_after_s=max(1.0, math.ceil(wait)),
            )
        b.tokens -= 1.0

    @asynccontextmanager
    async def admit_when_room(
        self, caller: Caller, n_items: int, *, priority_after_s: float = 5.0, since: float | None = None
    ) -> AsyncIterator[None]:
        """:meth:`admit` for background work (jobs): wait for room instead of raising.

        A job larger than what is usually free (more items than REWARDHUB_MAX_INFLIGHT_ITEMS, or a big one
        on a busy service) only fits when the service is nearly idle, and a steady stream of small
        requests keeps it from ever being: it waited for ever. After ``priority_after_s`` of waiting it
        goes first: new calls that would leave it no room get 429 until the work in flight drains and it
        starts. Not while it waits for its own key's turn (the key's concurrency quota or rate limit):
        room kept free then would keep other keys out for nothing. ``since`` (monotonic): when it began
        waiting, for a caller that comes back after an interruption (a full CPU queue) and must keep its
        place in line."""
        ticket = next(self._tickets)
        start = time.monotonic() if since is None else since
        waiter = self._waiters[ticket] = _Waiter(n_items, start, priority_after_s)
        try:
            while True:
                try:
                    self._check_room(n_items, waiter.since)
                except Overloaded as exc:
                    waiter.for_room = True
                    await asyncio.sleep(min(exc.retry_after_s, 0.25))
                    continue
                try:
                    self._check_key(caller)
                    self._take_token(caller)
                    break
                except Overloaded as exc:
                    waiter.for_room = False  # its own key's turn: no room is held back for it meanwhile
                    await asyncio.sleep(min(exc.retry_after_s, 0.25))
        finally:
            del self._waiters[ticket]
        async with self._held(caller, n_items):
            yield

    @asynccontextmanager
    async def admit(self, caller: Caller, n_items: int) -> AsyncIterator[None]:
        """Reserve room for a call for the duration of the block, or raise Overloaded (429)."""
        self.check(caller, n_items)
        self._take_token(caller)
        async with self._held(caller, n_items):
            yield

    @asynccontextmanager
    async def _held(self, caller: Caller, n_items: int) -> AsyncIterator[None]:
        self.items += n_items
        key = caller.key_id
        self._per_key[key] = self._per_key.get(key, 0) + 1
        try:
            yield
        finally:
            self.items -= n_items
            left = self._per_key[key] - 1
            if left:
                self._per_key[key] = left
            else:
                del self._per_key[key]
