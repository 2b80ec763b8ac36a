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
        if metrics is not None:
            metrics.watch(metrics.queue_depth.labels("inflight_items"), lambda: self.items)

    def check(self, caller: Caller, n_items: int) -> None:
        """Raise Overloaded if this call would exceed a bound (nothing is reserved)."""
        if self.items and self.items + n_items > self.max_items:
            raise Overloaded(
                f"{self.items} items are being scored; {n_items} more would exceed the limit of "
                f"{self.max_items} (REWARDHUB_MAX_INFLIGHT_ITEMS)",
                retry_after_s=1.0,
            )
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
    async def admit(self, caller: Caller, n_items: int) -> AsyncIterator[None]:
        """Reserve room for a call for the duration of the block, or raise Overloaded (429)."""
        self.check(caller, n_items)
        self._take_token(caller)
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
